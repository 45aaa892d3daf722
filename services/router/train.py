"""Train the multi-hop classifier on public question sets: HotpotQA and MuSiQue questions are multi-hop,
SQuAD 2.0 and Natural Questions questions are single-hop. Deterministic: a fixed 80/20 split by question
hash, full-batch gradient descent."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from ragline.eval.datasets import load
from services.router.classifier import DEFAULT_MODEL, N_FEATURES, features

DATA = Path(__file__).resolve().parents[2] / "eval" / "data"


def questions() -> list[tuple[str, int]]:
    multi = [q.text for q in load("hotpotqa", DATA / "hotpotqa" / "hotpotqa_train.json").questions]
    multi += [q.text for q in load("musique", DATA / "musique" / "musique_train.json").questions]
    single = [q.text for q in load("squad", DATA / "squad" / "squad2_dev_2articles_626q.json").questions]
    single += [json.loads(line)["question"] for line in (DATA / "nq" / "nq_longanswer_context113.jsonl").read_text().splitlines()]
    return [(q, 1) for q in multi] + [(q, 0) for q in single]


def matrix(texts: list[str]) -> np.ndarray:
    x = np.zeros((len(texts), N_FEATURES))
    for row, text in enumerate(texts):
        for idx, v in features(text).items():
            x[row, idx] = v
    return x


def main() -> int:
    data = questions()
    is_test = [int(hashlib.sha1(q.encode()).hexdigest(), 16) % 5 == 0 for q, _ in data]
    train = [d for d, t in zip(data, is_test, strict=True) if not t]
    test = [d for d, t in zip(data, is_test, strict=True) if t]
    x, y = matrix([q for q, _ in train]), np.array([label for _, label in train], dtype=float)
    # Balance the classes: single-hop questions outnumber multi-hop ones about 4 to 1.
    sample_w = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    w, b = np.zeros(N_FEATURES), 0.0
    for _ in range(1500):
        p = 1 / (1 + np.exp(-(x @ w + b)))
        g = (p - y) * sample_w
        w -= 1.0 * (x.T @ g / len(y) + 1e-4 * w)
        b -= 1.0 * g.mean()
    xt, yt = matrix([q for q, _ in test]), np.array([label for _, label in test])
    pred = (1 / (1 + np.exp(-(xt @ w + b)))) > 0.5
    accuracy = float((pred == yt).mean())
    recall_multi = float(pred[yt == 1].mean())
    recall_single = float((~pred[yt == 0]).mean())
    model = {
        "kind": "logistic regression, hashed word 1-2 grams + structural cues",
        "trained_on": ["HotpotQA train (CC BY-SA 4.0)", "MuSiQue train (CC BY 4.0)", "SQuAD 2.0 dev (CC BY-SA 4.0)",
                       "Natural Questions (CC BY-SA 3.0)"],
        "train_questions": len(train), "heldout_questions": len(test),
        "heldout_accuracy": round(accuracy, 4), "heldout_recall_multihop": round(recall_multi, 4),
        "heldout_recall_singlehop": round(recall_single, 4),
        "bias": round(b, 6),
        "weights": {str(i): round(float(v), 5) for i, v in enumerate(w) if abs(v) > 1e-4},
    }
    DEFAULT_MODEL.write_text(json.dumps(model) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in model.items() if k != "weights"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
