"""The two scores behind a hybrid hit, as Weaviate's explain text gives them."""

from __future__ import annotations

import re

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
