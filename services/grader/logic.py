"""Offline grading from lexical evidence: relevance from query-term coverage, support from
answer-to-passage overlap, usefulness from how much of the question the answer addresses."""

from __future__ import annotations

import re

from ragline.domain.glossary import NO_GLOSSARY, Glossary, concept_coverage
from ragline.domain.lexical import coverage
from ragline.domain.text import question_tokens, tokens

_CITATION = re.compile(r"\[\d+\]")


def relevance(query: str, title: str, text: str, glossary: Glossary = NO_GLOSSARY) -> float:
    """Share of what the question asks about (its words, or their synonyms in the tenant's glossary) in the passage."""
    return concept_coverage(glossary.concepts(query), f"{title} {text}")


def support(answer: str, context_texts: list[str]) -> float:
    answer_toks = tokens(_CITATION.sub(" ", answer))
    return coverage(answer_toks, tokens(" ".join(context_texts)))


def usefulness(query: str, answer: str) -> float:
    """How much of what the question asks about the answer speaks to; an empty answer scores 0."""
    answer_toks = tokens(_CITATION.sub(" ", answer))
    if not answer_toks:
        return 0.0
    query_toks = question_tokens(query)
    if not query_toks:
        return 1.0
    return coverage(query_toks, answer_toks)
