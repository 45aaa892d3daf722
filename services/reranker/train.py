"""`make train-reranker`: fit the learned reranker on public question sets (needs `make up` running).

For every training question, the hybrid search of the running retrieval service returns its candidates;
the gold passages are the positives. A pairwise logistic regression (linear RankNet) on standardised
features is fitted deterministically by full-batch gradient descent, and written with its provenance."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from ragline.eval.datasets import Dataset, Passage, Question, load
from ragline.eval.retrieval import CANDIDATES, Stubs, fresh_tenant, ingest
from ragline.v1 import retrieval_pb2
from services.reranker.config import RerankerSettings
from services.reranker.features import NAMES, Candidate, featurize
from services.reranker.logic import DEFAULT_MODEL

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "eval" / "data"
# Sets the acceptance evaluation does not use, so every figure reported for it is on unseen data.
TRAINING_SETS = [
    ("squad", DATA / "squad" / "squad2_dev_2articles_626q.json", "SQuAD 2.0 dev (CC BY-SA 4.0)"),
    ("nq", DATA / "nq" / "nq_longanswer_context113.jsonl", "Natural Questions (CC BY-SA 3.0)"),
]


def load_nq(path: Path) -> Dataset:
    """NQ questions with their long-answer paragraph; the corpus is the union of those paragraphs."""
    passages: dict[str, Passage] = {}
    questions = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        rec = json.loads(line)
        pid = f"nq-{i}"
        passages[pid] = Passage(pid, rec.get("title", ""), rec["context"])
        questions.append(Question(f"nq-q{i}", rec["question"], {pid: 1}))
    return Dataset("nq", list(passages.values()), questions)


def collect(stubs: Stubs, ds: Dataset, alpha: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """(features, labels) of every question's hybrid candidate list that holds a positive and a negative."""
    max_chars = RerankerSettings().max_length * 4  # what the service scores
    tenant = fresh_tenant(ds, prefix="train")
    ingest(stubs, tenant, ds, lambda msg: print(msg, file=sys.stderr, flush=True))
    lists = []
    try:
        for q in ds.questions:
            if not q.relevant:
                continue
            resp = stubs.retrieval.Search(retrieval_pb2.SearchRequest(tenant=tenant, query=q.text, alpha=alpha,
                                                                      limit=CANDIDATES), timeout=60)
            cands = [Candidate.of(r, max_chars) for r in resp.results]
            labels = np.asarray([1.0 if r.chunk.document_id in q.relevant else 0.0 for r in resp.results])
            if 0 < labels.sum() < len(labels):
                lists.append((featurize(q.text, cands), labels))
    finally:
        stubs.retrieval.DeleteTenant(retrieval_pb2.DeleteTenantRequest(tenant=tenant), timeout=120)
    return lists


def fit_pairwise(lists: list[tuple[np.ndarray, np.ndarray]], l2: float = 1e-3, steps: int = 3000, lr: float = 0.5):
    all_x = np.vstack([x for x, _ in lists])
    mean, std = all_x.mean(axis=0), all_x.std(axis=0)
    std[std == 0] = 1.0
    diffs = []
    for x, y in lists:
        z = (x - mean) / std
        pos, neg = z[y > 0], z[y == 0]
        diffs.append((pos[:, None, :] - neg[None, :, :]).reshape(-1, z.shape[1]))
    d = np.vstack(diffs)
    w = np.zeros(d.shape[1])
    for _ in range(steps):
        margin = d @ w
        grad = -(d * (1.0 / (1.0 + np.exp(margin)))[:, None]).mean(axis=0) + l2 * w
        w -= lr * grad
    loss = float(np.mean(np.log1p(np.exp(-(d @ w)))))
    return mean, std, w, len(d), loss


def fit_calibration(lists: list[tuple[np.ndarray, np.ndarray]], mean: np.ndarray, std: np.ndarray, w: np.ndarray,
                    steps: int = 5000, lr: float = 0.5) -> tuple[float, float]:
    """Platt scaling: P(relevant) = sigmoid(a * score + b), fitted on the same candidate lists, so that a grader
    can threshold the reranker's score as a probability."""
    scores = np.concatenate([((x - mean) / std) @ w for x, _ in lists])
    labels = np.concatenate([y for _, y in lists])
    a, b = 1.0, 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(a * scores + b)))
        a -= lr * float(((p - labels) * scores).mean())
        b -= lr * float((p - labels).mean())
    return a, b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.reranker.train")
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--out", default=str(DEFAULT_MODEL))
    args = parser.parse_args(argv)
    stubs = Stubs.connect()
    lists = []
    for fmt, path, _ in TRAINING_SETS:
        ds = load_nq(path) if fmt == "nq" else load(fmt, path)
        lists += collect(stubs, ds, args.alpha)
    mean, std, w, pairs, loss = fit_pairwise(lists)
    a, b = fit_calibration(lists, mean, std, w)
    model = {
        "kind": "pairwise logistic regression over reranking features",
        "features": list(NAMES),
        "mean": mean.round(6).tolist(),
        "std": std.round(6).tolist(),
        "weights": w.round(6).tolist(),
        "calibration": {"a": round(a, 6), "b": round(b, 6)},
        "trained_on": [attribution for _, _, attribution in TRAINING_SETS],
        "training": {"lists": len(lists), "pairs": pairs, "final_loss": round(loss, 4), "alpha": args.alpha,
                     "candidates": CANDIDATES},
    }
    Path(args.out).write_text(json.dumps(model, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"weights": dict(zip(NAMES, model["weights"], strict=True)), **model["training"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
