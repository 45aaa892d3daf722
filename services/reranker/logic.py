"""Reranking models behind one interface."""

from __future__ import annotations

import math
from typing import Protocol

from ragline.text import tokens


class Scorer(Protocol):
    name: str

    def score(self, query: str, passages: list[tuple[str, str]], fused: list[float]) -> list[float]: ...


def _bigrams(toks: list[str]) -> set[tuple[str, str]]:
    return set(zip(toks, toks[1:], strict=False))


class FeatureScorer:
    """Query-passage evidence the fused hybrid score does not see: term coverage, phrase (bigram)
    matches and title hits, combined with the fused score itself. No model weights needed."""

    name = "features-v1"
    # Weights of coverage, bigram, title and fused-score features.
    weights = (1.0, 0.6, 0.4, 0.8)

    def score(self, query: str, passages: list[tuple[str, str]], fused: list[float]) -> list[float]:
        q = tokens(query)
        if not q:
            return list(fused)
        q_set, q_bi = set(q), _bigrams(q)
        top = max(fused) if fused and max(fused) > 0 else 1.0
        out = []
        for (title, text), f in zip(passages, fused, strict=True):
            body = tokens(text)
            body_set = set(body)
            coverage = sum(math.log1p(1) for t in q_set if t in body_set) / (len(q_set) * math.log1p(1))
            bigram = len(q_bi & _bigrams(body)) / len(q_bi) if q_bi else 0.0
            title_hit = len(q_set & set(tokens(title))) / len(q_set)
            w = self.weights
            out.append(w[0] * coverage + w[1] * bigram + w[2] * title_hit + w[3] * (f / top))
        return out


class CrossEncoderScorer:
    """A sentence-transformers CrossEncoder by Hugging Face id or local path."""

    def __init__(self, model: str, max_length: int, batch_size: int) -> None:
        from sentence_transformers import CrossEncoder

        self._model = CrossEncoder(model, max_length=max_length, device="cpu")
        self.batch_size = batch_size
        self.name = f"cross-encoder/{model}"

    def score(self, query: str, passages: list[tuple[str, str]], fused: list[float]) -> list[float]:
        pairs = [(query, f"{title}\n{text}") for title, text in passages]
        return [float(s) for s in self._model.predict(pairs, batch_size=self.batch_size)]


def load_scorer(spec: str, max_length: int, batch_size: int) -> Scorer:
    if spec == "features":
        return FeatureScorer()
    if spec.startswith("cross-encoder:"):
        return CrossEncoderScorer(spec.split(":", 1)[1], max_length, batch_size)
    raise ValueError(f"unknown reranker model {spec!r}: use 'features' or 'cross-encoder:<model>'")
