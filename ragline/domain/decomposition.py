"""Heuristic decomposition, shared by the generator (its Decompose RPC) and the router (which returns it with a
multi-hop route, so the adaptive flow needs no separate call): comparisons and conjunctions split into
independent sub-questions; anything else stays whole for iterative (bridge) retrieval."""

from __future__ import annotations

import re

KINDS = ["single", "comparison", "conjunction", "bridge"]
# The structured output a model fills in to decompose (the generator's Decompose, and the router's route).
SUB_QUESTIONS_SCHEMA = {"type": "array", "items": {
    "type": "object",
    "properties": {"text": {"type": "string", "maxLength": 300}, "depends_on": {"type": "array", "items": {"type": "integer"}}},
    "required": ["text", "depends_on"], "additionalProperties": False}}
INSTRUCTIONS = """split the question into at most {max_hops} simpler sub-questions that can each be answered
from one passage. depends_on lists the indexes (0-based) of earlier sub-questions whose answers are needed;
write a dependent sub-question with the placeholder #N for the answer of sub-question N. A question that needs
no splitting is one sub-question of kind "single"."""


def from_model(sub_questions: list[dict], query: str, max_hops: int) -> list[tuple[str, list[int]]]:
    """A model's sub-questions, bounded, each depending only on earlier ones (so no plan can cycle)."""
    subs = [(s["text"], [d for d in s["depends_on"] if 0 <= d < i]) for i, s in enumerate(sub_questions[:max_hops])]
    return subs or [(query, [])]


_COMPARISON_ZH = re.compile(r"(.+?)(?:和|与|跟|及)(.+?)(?:的|在|相比|之间)?(?:区别|差异|对比|比较|不同|哪个|谁)(.*)")
_COMPARISON_EN = re.compile(
    r"(?:compare|difference between|differences between)\s+(.+?)\s+(?:and|with|vs\.?|versus)\s+(.+?)"
    r"(?:\s+(?:in|on|for|regarding)\s+(.+?))?[?.]?$",
    re.I,
)
_CONJUNCTION = re.compile(r"\?\s+|？|；|;\s*|,? and (?=(?:what|how|why|when|where|who|which)\b)|以及|并且")
_BOTH_EN = re.compile(r"^(?:are|were|is|was|do|did)\s+(.+?)\s+and\s+(.+?)\s+(both\s+.+?|of the same .+?|the same .+?)\??$", re.I)
_WHICH_EN = re.compile(r"^(?:which|who)\s+.*?,\s*(.+?)\s+or\s+(.+?)\??$", re.I)


def decompose(query: str, max_hops: int) -> tuple[list[tuple[str, list[int]]], str]:
    """Comparisons and conjunctions split into independent sub-questions; anything else stays whole
    and is handled by iterative (bridge) retrieval in the orchestrator."""
    q = query.strip()
    subs: list[str] = []
    kind = "single"
    if m := _COMPARISON_EN.search(q):
        aspect = (m.group(3) or "").strip()
        subs = [f"{e.strip()} {aspect}".strip() for e in (m.group(1), m.group(2))]
        kind = "comparison"
    elif m := _BOTH_EN.match(q):
        subs = [f"{m.group(1).strip()} {m.group(3).replace('both', '').strip()}", f"{m.group(2).strip()} {m.group(3).replace('both', '').strip()}"]
        kind = "comparison"
    elif m := _WHICH_EN.match(q):
        head = q.split(",")[0]
        subs = [f"{head} {m.group(1).strip()}", f"{head} {m.group(2).strip()}"]
        kind = "comparison"
    elif m := _COMPARISON_ZH.search(q):
        aspect = m.group(3).strip("？?。 ")
        subs = [f"{m.group(1).strip()}{aspect}", f"{m.group(2).strip()}{aspect}"]
        kind = "comparison"
    else:
        parts = [p.strip(" ,，。？?") for p in _CONJUNCTION.split(q) if p and p.strip(" ,，。？?")]
        if len(parts) > 1:
            subs, kind = parts, "conjunction"
    if not subs:
        return [(q, [])], "single"
    return [(s, []) for s in subs[:max_hops]], kind
