"""A small learned classifier: is a question multi-hop (needs several passages) or single-hop?

Hashed word unigrams and bigrams plus a few structural cues, scored by logistic regression. Trained by
`python -m services.router.train` on public English question sets; Chinese questions fall back to rules,
because no public Chinese multi-hop question set is available to learn from."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np

from ragline.domain.text import has_cjk

DIM = 1 << 14
DEFAULT_MODEL = Path(__file__).resolve().parent / "models" / "multihop-classifier.json"
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")


def _bucket(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=4).digest(), "little") % DIM


def features(question: str) -> dict[int, float]:
    """Sparse feature vector: hashed n-grams (DIM buckets) and structural cues after them."""
    words = _WORD.findall(question.lower())
    feats: dict[int, float] = {}
    grams = words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
    for g in grams:
        idx = _bucket(g)
        feats[idx] = feats.get(idx, 0.0) + 1.0
    norm = math.sqrt(sum(v * v for v in feats.values())) or 1.0
    feats = {k: v / norm for k, v in feats.items()}
    entities = len(_CAPITALISED.findall(question))
    structural = [
        math.log1p(len(words)) / 4,
        min(entities, 6) / 6,
        float(len(re.findall(r"\b(of|whose|which|that|who)\b", question.lower())) >= 2),
        float(bool(re.search(r"\b(both|same|older|younger|first|earlier|later|more|less)\b", question.lower()))),
    ]
    for i, v in enumerate(structural):
        feats[DIM + i] = v
    return feats


N_FEATURES = DIM + 4


class MultiHopClassifier:
    def __init__(self, path: Path = DEFAULT_MODEL) -> None:
        model = json.loads(path.read_text(encoding="utf-8"))
        self.bias = float(model["bias"])
        self.weights = np.zeros(N_FEATURES)
        for idx, w in model["weights"].items():
            self.weights[int(idx)] = w
        self.accuracy = model.get("heldout_accuracy")

    def probability(self, question: str) -> float | None:
        """P(multi-hop), or None when the classifier cannot judge (a Chinese question)."""
        if has_cjk(question):
            return None
        z = self.bias + sum(self.weights[i] * v for i, v in features(question).items())
        return 1.0 / (1.0 + math.exp(-z))
