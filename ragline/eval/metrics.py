"""Retrieval and answer metrics."""

from __future__ import annotations

import math
import re
import string
from collections import Counter

from ragline.domain.text import has_cjk


def ndcg_at_k(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    dcg = sum((2 ** relevant.get(pid, 0) - 1) / math.log2(i + 2) for i, pid in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at_k(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    gold = {pid for pid, g in relevant.items() if g > 0}
    return len(gold & set(ranked[:k])) / len(gold) if gold else 0.0


def mrr_at_k(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    for i, pid in enumerate(ranked[:k]):
        if relevant.get(pid, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[idx]


_ZH_PUNCT = "，。！？；：、（）《》“”‘’【】—…·「」"


def normalize_answer(text: str, chinese: bool | None = None) -> str:
    """SQuAD normalisation: lower case, no punctuation, articles or extra space (Chinese: no spaces at all).
    `chinese` forces either mode, so that two texts of which only one holds Chinese are compared alike."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation) | set(_ZH_PUNCT))
    if has_cjk(text) if chinese is None else chinese:
        return re.sub(r"\s+", "", text)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _answer_tokens(text: str) -> list[str]:
    norm = normalize_answer(text)
    return list(norm) if has_cjk(norm) else norm.split()


def exact_match(prediction: str, golds: list[str]) -> float:
    return float(any(normalize_answer(prediction) == normalize_answer(g) for g in golds))


def f1(prediction: str, golds: list[str]) -> float:
    best = 0.0
    pred = _answer_tokens(prediction)
    for gold in golds:
        gold_toks = _answer_tokens(gold)
        common = Counter(pred) & Counter(gold_toks)
        same = sum(common.values())
        if same == 0:
            continue
        precision, recall = same / len(pred), same / len(gold_toks)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def contains_answer(prediction: str, golds: list[str]) -> float:
    """acc: the normalised gold answer, or any alias, occurs in the normalised prediction."""
    def found(gold: str) -> bool:
        # An English answer quoted inside a Chinese one (or the reverse) is compared without spaces on both sides.
        chinese = has_cjk(prediction) or has_cjk(gold)
        norm = normalize_answer(gold, chinese)
        return bool(norm) and norm in normalize_answer(prediction, chinese)

    return float(any(found(g) for g in golds))
