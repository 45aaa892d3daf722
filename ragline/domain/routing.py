"""Rule-based routing: the fast path that decides most queries without a model."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ragline.domain.text import detect_language
from ragline.v1 import common_pb2

QT = common_pb2


@dataclass
class Route:
    query_type: int
    strategy: int
    reason: str
    confidence: float
    language: str
    intent: str = "lookup"
    filters: dict[str, list[str]] = field(default_factory=dict)
    # Set when the model that routed also decomposed: (sub-question, indexes it depends on), and the kind.
    sub_questions: list[tuple[str, list[int]]] = field(default_factory=list)
    decomposition: str = ""


_GREETING = re.compile(
    r"^\s*(hi|hello|hey|thanks|thank you|good (morning|afternoon|evening)|who are you|what can you do|"
    r"你好|您好|嗨|谢谢|早上好|晚上好|你是谁|你能做什么|你会什么)\W*\s*$",
    re.I,
)
_COMPARE = re.compile(
    r"\b(compare|comparison|versus|vs\.?|difference between|differ|both|which (is|was) (older|larger|bigger|first|more)|"
    r"same (nationality|country)|(older|younger|earlier|later|longer|bigger|larger) than)\b|"
    r"比较|对比|区别|差异|相比|哪个更|还是|分别|两者|都是",
    re.I,
)
_MULTI_STEP = re.compile(
    r"\b(why did|how did .* lead|what caused|step by step|after .* then|the (director|author|founder|spouse|father|"
    r"mother|capital|country) of the)\b|原因.*影响|导致|之后.*再|先.*再|为什么会|根本原因",
    re.I,
)
# Two questions in one ("..., and why ...?"): each part needs its own retrieval.
_CONJOINED = re.compile(r",?\s+and\s+(what|why|how|when|where|who|which)\b|[？?]\s*\S.*[？?]\s*$|以及.*[？?]", re.I)
_VERIFY = re.compile(
    r"\b(is it true|verify|confirm|really|fact[- ]check|correct that|accurate|exactly|precisely|must|guarantee)\b|"
    r"是否|是不是|真的|确认|核实|准确|确切|一定|有没有|对吗",
    re.I,
)
_CREATIVE = re.compile(
    r"^\s*(write|draft|compose|brainstorm|imagine|suggest|propose|create a|generate a)\b|"
    r"写一|帮我写|起草|创作|头脑风暴|想象|建议一些|生成一",
    re.I,
)
# "in <doc_type>" style hints that become metadata filters (seed 004's query analysis).
# Only phrases that name a kind of document: a bare "class" or "function" is as often about ruling classes and
# complexity classes (34 of SQuAD 2.0's 626 questions), and "the documents" (文档) could be any of them.
_DOC_TYPE_HINTS = {
    "code": re.compile(r"\b(in the (source )?code|source code|code (snippet|sample|example)s?)\b|代码[里中]|源码|源代码", re.I),
    "markdown": re.compile(r"\b(runbooks?|handbooks?)\b|运维手册|手册[里中]", re.I),
}
_INTENTS = [
    ("troubleshoot", re.compile(
        r"\b(error|fail|failed|failure|crash|timeout|outage|down|exception|fix)\b|报错|失败|故障|宕机|超时|异常|排查|怎么办", re.I)),
    ("howto", re.compile(r"^\s*how (do|to|can|should)\b|如何|怎么|怎样|步骤", re.I)),
    ("definition", re.compile(r"^\s*what (is|are)\b|是什么|什么是|定义", re.I)),
    ("comparison", _COMPARE),
]


def intent_of(query: str) -> str:
    for name, pattern in _INTENTS:
        if pattern.search(query):
            return name
    return "lookup"


def extract_filters(query: str) -> dict[str, list[str]]:
    filters: dict[str, list[str]] = {}
    for doc_type, pattern in _DOC_TYPE_HINTS.items():
        if pattern.search(query):
            filters.setdefault("doc_type", []).append(doc_type)
    return filters


def route_by_rules(query: str) -> Route:
    lang = detect_language(query)
    intent = intent_of(query)
    filters = extract_filters(query)

    def make(qt: int, strategy: int, reason: str, confidence: float) -> Route:
        return Route(qt, strategy, reason, confidence, lang, intent, filters)

    if _GREETING.match(query):
        return make(QT.QUERY_TYPE_NO_RETRIEVAL, QT.STRATEGY_DIRECT, "rule: greeting or question about the assistant", 0.95)
    if _CREATIVE.search(query):
        return make(QT.QUERY_TYPE_OPEN_CREATIVE, QT.STRATEGY_LIGHT, "rule: open or creative request", 0.8)
    if _COMPARE.search(query):
        return make(QT.QUERY_TYPE_COMPLEX_REASONING, QT.STRATEGY_MULTIHOP, "rule: comparison of several entities", 0.85)
    if _CONJOINED.search(query):
        return make(QT.QUERY_TYPE_COMPLEX_REASONING, QT.STRATEGY_MULTIHOP, "rule: several questions in one", 0.85)
    if _VERIFY.search(query):
        return make(QT.QUERY_TYPE_NEEDS_VERIFICATION, QT.STRATEGY_SELFRAG, "rule: asks for a verified or exact fact", 0.75)
    if _MULTI_STEP.search(query):
        return make(QT.QUERY_TYPE_COMPLEX_REASONING, QT.STRATEGY_MULTIHOP, "rule: causal or multi-step question", 0.7)
    return make(QT.QUERY_TYPE_SIMPLE_FACT, QT.STRATEGY_STANDARD, "rule: no multi-hop, verification or creative cue", 0.6)
