"""Bridge entities for iterative multi-hop retrieval: what the best new passage names that the question
does not, so that the next hop can look it up."""

from __future__ import annotations

import re
from functools import lru_cache

from ragline.domain.text import has_cjk, sentences, tokens

_SPAN = re.compile(r"[A-Z][\w'’.-]*(?:(?:\s+(?:of|the|de|da|von|van|and|for|on))*\s+[A-Z][\w'’.-]*)*")
_NOT_ENTITIES = {"The", "A", "An", "In", "It", "He", "She", "They", "This", "That", "These", "Those", "His", "Her", "Its",
                 "On", "At", "As", "By", "For", "From", "After", "Before", "During", "When", "While", "There", "However"}


@lru_cache(maxsize=1)
def _jieba_analyse():  # type: ignore[no-untyped-def]
    import jieba.analyse

    return jieba.analyse


def bridge_entities(question: str, text: str, limit: int = 2) -> list[str]:
    """Named things in the passage that the question does not mention, most prominent first."""
    known = set(tokens(question))
    if has_cjk(text):
        tags = _jieba_analyse().extract_tags(text, topK=10)
        return [t for t in tags if t.lower() not in known and len(t) > 1][:limit]
    found: dict[str, float] = {}
    for position, match in enumerate(_SPAN.finditer(text)):
        span = match.group(0).strip(" .")
        if span in _NOT_ENTITIES or len(span) < 3:
            continue
        # A lone capitalised word opening a sentence is usually just the sentence's first word.
        sentence_start = match.start() == 0 or text[: match.start()].rstrip().endswith((".", "!", "?", ":"))
        if sentence_start and " " not in span:
            continue
        words = set(tokens(span))
        if not words or words <= known:
            continue
        # Earlier and repeated mentions are more central to the passage.
        found[span] = found.get(span, 0.0) + 1.0 / (1 + position * 0.1)
    return [span for span, _ in sorted(found.items(), key=lambda kv: kv[1], reverse=True)[:limit]]


def evidence_sentence(text: str, entity: str) -> str:
    """The passage's sentence that names the entity: the intermediate answer of a bridge hop."""
    return next((s for s in sentences(text) if entity in s), entity)
