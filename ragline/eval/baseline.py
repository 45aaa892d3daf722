"""The naive hybrid that every retrieval result is compared with: what a short script does with the same data —
rank-bm25 over each passage's lower-cased words (jieba's words for Chinese), the same embedder's cosine, and
relative-score fusion (each side's scores min-max normalised over the corpus, weighted by alpha). Passages are
ranked whole, never chunked."""

from __future__ import annotations

import re

import numpy as np

from ragline.domain.text import has_cjk
from ragline.embedding import Embedder
from ragline.eval.datasets import Dataset, Question

_WORD = re.compile(r"\w+")


def naive_tokens(text: str) -> list[str]:
    if has_cjk(text):
        import jieba

        return [t for t in (w.strip().lower() for w in jieba.lcut(text)) if t and _WORD.match(t)]
    return _WORD.findall(text.lower())


def _min_max(scores: np.ndarray) -> np.ndarray:
    low, high = float(scores.min()), float(scores.max())
    return (scores - low) / (high - low) if high > low else np.zeros_like(scores)


class NaiveHybrid:
    def __init__(self, ds: Dataset, embedder: Embedder) -> None:
        from rank_bm25 import BM25Okapi

        self.ids = [p.id for p in ds.passages]
        texts = [f"{p.title}\n{p.text}" if p.title else p.text for p in ds.passages]
        self.bm25 = BM25Okapi([naive_tokens(t) for t in texts])
        self.embedder = embedder
        self.vectors = embedder.embed_passages(texts)

    def rankings(self, questions: list[Question], alpha: float, k: int) -> dict[str, list[list[str]]]:
        """Per mode ("bm25", "vector", "hybrid"), each question's top k passage ids."""
        queries = self.embedder.embed_queries([q.text for q in questions])
        out: dict[str, list[list[str]]] = {"bm25": [], "vector": [], "hybrid": []}
        for q, vector in zip(questions, queries, strict=True):
            lexical = np.asarray(self.bm25.get_scores(naive_tokens(q.text)), dtype=np.float64)
            dense = self.vectors @ vector
            fused = alpha * _min_max(dense) + (1 - alpha) * _min_max(lexical)
            for mode, scores in (("bm25", lexical), ("vector", dense), ("hybrid", fused)):
                out[mode].append([self.ids[i] for i in np.argsort(-scores, kind="stable")[:k]])
        return out
