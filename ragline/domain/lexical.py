"""Lexical coverage: how much of a question's content words a text holds. The grader judges relevance by it and
the orchestrator decides by it whether one retrieval already covers a question."""

from __future__ import annotations

from ragline.domain.text import question_tokens, tokens
from ragline.v1 import common_pb2


def coverage(needles: list[str], haystack: list[str]) -> float:
    """Share of distinct needles found in the haystack."""
    wanted = set(needles)
    if not wanted:
        return 0.0
    return len(wanted & set(haystack)) / len(wanted)


def question_coverage(question: str, chunks: list[common_pb2.ScoredChunk]) -> float:
    """Share of the question's content words that the passages (with their titles) contain between them."""
    wanted = question_tokens(question)
    if not wanted:
        return 1.0
    return coverage(wanted, [t for c in chunks for t in tokens(f"{c.chunk.title} {c.chunk.text}")])
