"""Features of a (query, candidate) pair within its candidate list, for the learned reranker.

They add what the fused hybrid score does not see: how much of the question the passage and its title
cover, phrase (bigram) matches, whether the passage is about an entity the question names, and where the
candidate stands relative to the best of its list on each retrieval signal."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ragline.domain.text import detect_language, question_tokens, sentences, tokens
from ragline.v1 import common_pb2

NAMES = (
    "fused", "bm25_rel", "vector", "vector_gap", "inv_rank",
    "coverage", "title_coverage", "title_in_query", "bigram", "log_length", "lead_coverage", "log_bm25",
)


@dataclass
class Candidate:
    title: str
    text: str
    fused: float
    bm25: float
    vector: float

    @classmethod
    def of(cls, scored: common_pb2.ScoredChunk, max_chars: int | None = None) -> Candidate:
        c = scored.chunk
        return cls(c.title, c.text[:max_chars], scored.scores.fused or scored.score, scored.scores.bm25, scored.scores.vector)


def _bigrams(toks: list[str]) -> set[tuple[str, str]]:
    return set(zip(toks, toks[1:], strict=False))


def featurize(query: str, candidates: list[Candidate]) -> np.ndarray:
    """One row of NAMES per candidate, in the given (hybrid) order."""
    q = question_tokens(query)
    q_set, q_bi = set(q), _bigrams(q)
    max_bm25 = max((c.bm25 for c in candidates), default=0.0) or 1.0
    # A multilingual embedding scores every passage in the question's language above any in the other, so each
    # language's similarities are measured from the best candidate of that language: the gap to it, and the
    # similarity shifted by the difference between the languages' best. With one language nothing changes.
    langs = [detect_language(c.text) for c in candidates]
    best_vec: dict[str, float] = {}
    for lang, c in zip(langs, candidates, strict=True):
        best_vec[lang] = max(best_vec.get(lang, c.vector), c.vector)
    best_of_all = max(best_vec.values(), default=0.0)
    max_fused = max((c.fused for c in candidates), default=0.0) or 1.0
    rows = []
    for rank, c in enumerate(candidates):
        body = tokens(c.text)
        body_set = set(body)
        title = tokens(c.title)
        title_set = set(title)
        rows.append([
            c.fused / max_fused,
            c.bm25 / max_bm25,
            c.vector + best_of_all - best_vec[langs[rank]],
            c.vector - best_vec[langs[rank]],
            1.0 / (1 + rank),
            len(q_set & (body_set | title_set)) / len(q_set) if q_set else 0.0,
            len(q_set & title_set) / len(q_set) if q_set else 0.0,
            len(title_set & q_set) / len(title_set) if title_set else 0.0,
            len(q_bi & _bigrams(title + body)) / len(q_bi) if q_bi else 0.0,
            math.log1p(len(body)),
            # The opening sentence says what a passage is about (definitional in encyclopaedic text).
            len(q_set & set(tokens(lead[0]))) / len(q_set) if q_set and (lead := sentences(c.text)[:1]) else 0.0,
            math.log1p(max(c.bm25, 0.0)),
        ])
    return np.asarray(rows, dtype=np.float64).reshape(len(candidates), len(NAMES))
