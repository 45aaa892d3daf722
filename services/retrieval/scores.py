"""The two scores behind a hybrid hit: parsed from Weaviate's explain text, or recomputed from the vectors."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

_EXPLAIN_PART = re.compile(r"\(Result Set (keyword|vector)[^)]*\).*?original score ([-\d.e+]+)", re.S)


def parse_explain(explain: str) -> tuple[float, float]:
    """(bm25, vector) original scores from Weaviate's hybrid explain-score text."""
    bm25 = vector = 0.0
    for kind, value in _EXPLAIN_PART.findall(explain or ""):
        if kind == "keyword":
            bm25 = float(value)
        else:
            vector = float(value)
    return bm25, vector


def cosine(a: np.ndarray, b: Sequence[float]) -> float:
    v = np.asarray(b, dtype=np.float32)
    denom = float(np.linalg.norm(a) * np.linalg.norm(v))
    return float(a @ v) / denom if denom else 0.0
