"""How the router decides: rules first (the fast path), then the learned classifier or an LLM for the rest."""

from __future__ import annotations

from dataclasses import replace

from ragline.domain.decomposition import INSTRUCTIONS, KINDS, SUB_QUESTIONS_SCHEMA, from_model
from ragline.domain.routing import Route, route_by_rules
from ragline.llm import LlmClient, Usage, with_fallback
from ragline.v1 import common_pb2
from services.router.classifier import MultiHopClassifier

STRATEGY_OF = {
    common_pb2.QUERY_TYPE_SIMPLE_FACT: common_pb2.STRATEGY_STANDARD,
    common_pb2.QUERY_TYPE_COMPLEX_REASONING: common_pb2.STRATEGY_MULTIHOP,
    common_pb2.QUERY_TYPE_NEEDS_VERIFICATION: common_pb2.STRATEGY_SELFRAG,
    common_pb2.QUERY_TYPE_OPEN_CREATIVE: common_pb2.STRATEGY_LIGHT,
    common_pb2.QUERY_TYPE_NO_RETRIEVAL: common_pb2.STRATEGY_DIRECT,
}
QUERY_TYPES = {
    "SIMPLE_FACT": common_pb2.QUERY_TYPE_SIMPLE_FACT,
    "COMPLEX_REASONING": common_pb2.QUERY_TYPE_COMPLEX_REASONING,
    "NEEDS_VERIFICATION": common_pb2.QUERY_TYPE_NEEDS_VERIFICATION,
    "OPEN_CREATIVE": common_pb2.QUERY_TYPE_OPEN_CREATIVE,
    "NO_RETRIEVAL": common_pb2.QUERY_TYPE_NO_RETRIEVAL,
}
# The route and, for a question that needs several passages, its decomposition: one model call instead of two.
ROUTE_SCHEMA = {
    "type": "object",
    "properties": {
        "query_type": {"type": "string", "enum": list(QUERY_TYPES)},
        "reason": {"type": "string", "maxLength": 200},
        "decomposition": {"type": "string", "enum": KINDS},
        "sub_questions": SUB_QUESTIONS_SCHEMA,
    },
    "required": ["query_type", "reason", "decomposition", "sub_questions"],
    "additionalProperties": False,
}
ROUTE_PROMPT = """You route questions for a question-answering system over an organisation's documents.
Classify the question into exactly one type:
- SIMPLE_FACT: one fact that a single passage can answer.
- COMPLEX_REASONING: needs several passages: comparisons, multi-step or bridge questions, causes and effects.
- NEEDS_VERIFICATION: asks whether something is true, or for an exact figure that must be checked.
- OPEN_CREATIVE: asks to write, draft, brainstorm or suggest.
- NO_RETRIEVAL: greetings, chit-chat, or questions about the assistant itself.
Answer in JSON with the type and a one-sentence reason. For COMPLEX_REASONING also """ + INSTRUCTIONS + """
For any other type, give decomposition "single" and no sub-questions."""


def _typed(route: Route, query_type: int, reason: str, confidence: float, decided_by: str) -> tuple[Route, str]:
    return replace(route, query_type=query_type, strategy=STRATEGY_OF[query_type], reason=reason, confidence=confidence), decided_by


class RouterBackend:
    def __init__(self, classifier: MultiHopClassifier | None, llm: LlmClient | None,
                 fast_path_confidence: float, multihop_threshold: float, max_sub_questions: int = 3) -> None:
        self.classifier = classifier
        self.llm = llm
        self.fast_path_confidence = fast_path_confidence
        self.multihop_threshold = multihop_threshold
        self.max_sub_questions = max_sub_questions

    async def route(self, query: str, usage: Usage) -> tuple[Route, str]:
        rules = route_by_rules(query)
        if rules.confidence >= self.fast_path_confidence:
            return rules, "rules"
        llm = self.llm
        return await with_fallback("route", llm and (lambda: self._ask_llm(llm, query, rules, usage)),
                                   lambda: self._offline(query, rules), usage)

    async def _ask_llm(self, llm: LlmClient, query: str, rules: Route, usage: Usage) -> tuple[Route, str]:
        prompt = ROUTE_PROMPT.format(max_hops=self.max_sub_questions)
        out = await llm.structured("route", prompt, query, ROUTE_SCHEMA, usage)
        route, decided_by = _typed(rules, QUERY_TYPES[out["query_type"]], f"llm: {out['reason']}", 0.9, "llm")
        if route.strategy == common_pb2.STRATEGY_MULTIHOP and out["sub_questions"]:
            route = replace(route, decomposition=out["decomposition"],
                            sub_questions=from_model(out["sub_questions"], query, self.max_sub_questions))
        return route, decided_by

    async def _offline(self, query: str, rules: Route) -> tuple[Route, str]:
        # Verification cues are explicit words; the classifier only tells multi-hop from single-hop.
        if rules.query_type == common_pb2.QUERY_TYPE_NEEDS_VERIFICATION:
            return rules, "rules"
        p_multi = self.classifier.probability(query) if self.classifier else None
        if p_multi is None:
            return rules, "rules"
        if p_multi >= self.multihop_threshold:
            return _typed(rules, common_pb2.QUERY_TYPE_COMPLEX_REASONING,
                          f"classifier: P(multi-hop) = {p_multi:.2f}", p_multi, "classifier")
        return _typed(rules, common_pb2.QUERY_TYPE_SIMPLE_FACT,
                      f"classifier: P(multi-hop) = {p_multi:.2f}", 1 - p_multi, "classifier")
