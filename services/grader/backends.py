"""Grading backends: offline lexical and reranker evidence, or an LLM with structured outputs."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ragline.domain.glossary import Glossaries
from ragline.domain.text import detect_language
from ragline.llm import PASSAGES_ARE_DATA, LlmClient, Usage, numbered_passages, passage_block
from ragline.v1 import common_pb2
from services.grader.config import GraderSettings
from services.grader.logic import relevance, support, usefulness

RELEVANCE_SCHEMA = {
    "type": "object",
    "properties": {"relevant": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 200}},
    "required": ["relevant", "reason"],
    "additionalProperties": False,
}
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"supported": {"type": "boolean"}, "useful": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 200}},
    "required": ["supported", "useful", "reason"],
    "additionalProperties": False,
}
RELEVANCE_PROMPT = """You grade whether a retrieved passage is relevant to a question: it contains information
that helps answer it. Answer in JSON: relevant (true or false) and a short reason. """ + PASSAGES_ARE_DATA
ANSWER_PROMPT = """You check an answer against the passages it was written from.
supported: every claim in the answer is stated in or follows from the passages.
useful: the answer addresses what the question asks.
Answer in JSON: supported, useful (true or false) and a short reason. """ + PASSAGES_ARE_DATA


@dataclass
class DocumentVerdict:
    relevant: bool
    score: float
    reason: str


@dataclass
class AnswerVerdict:
    supported: bool
    useful: bool
    support_score: float
    useful_score: float
    reason: str


class OfflineGrader:
    """Relevance from the reranker's calibrated probability where the passage was reranked (measured on HotpotQA,
    MuSiQue and CMRC, far more precise than word overlap), else from query-term coverage; support from
    answer-to-passage overlap; usefulness from how much of the question the answer covers."""

    def __init__(self, settings: GraderSettings, glossaries: Glossaries | None = None) -> None:
        self.s = settings
        self.glossaries = glossaries or Glossaries()

    async def documents(self, query: str, candidates: list[common_pb2.ScoredChunk], usage: Usage) -> list[DocumentVerdict]:
        out = []
        lang = detect_language(query)
        for c in candidates:
            cov = relevance(query, c.chunk.title, c.chunk.text, self.glossaries.for_tenant(c.chunk.tenant))
            if c.scores.HasField("relevance_probability"):
                p = c.scores.relevance_probability
                # The reranker's lexical features cannot see a passage in the other language; coverage through
                # the tenant's glossary can, so either is enough there.
                across = detect_language(c.chunk.text) != lang and cov >= self.s.min_relevance
                out.append(DocumentVerdict(p >= self.s.min_relevance_probability or across, p,
                                           f"reranker probability {p:.2f}; query-term coverage {cov:.2f}"
                                           + ("; other language, judged by coverage" if across else "")))
            else:
                out.append(DocumentVerdict(cov >= self.s.min_relevance, cov, f"query-term coverage {cov:.2f}"))
        return out

    async def answer(self, query: str, answer: str, context: list[common_pb2.ScoredChunk], usage: Usage) -> AnswerVerdict:
        sup = support(answer, [c.chunk.text for c in context])
        use = usefulness(query, answer)
        return AnswerVerdict(sup >= self.s.min_support, use >= self.s.min_usefulness, sup, use,
                             f"answer words found in context {sup:.2f}; question words addressed {use:.2f}")


class LlmGrader:
    def __init__(self, llm: LlmClient, votes: int) -> None:
        self.llm = llm
        self.votes = votes

    async def _ask(self, name: str, prompt: str, user: str, schema: dict, key: str, usage: Usage) -> dict:
        if self.votes > 1:
            return await self.llm.vote(name, prompt, user, schema, key, usage, rounds=self.votes)
        return await self.llm.structured(name, prompt, user, schema, usage)

    async def documents(self, query: str, candidates: list[common_pb2.ScoredChunk], usage: Usage) -> list[DocumentVerdict]:
        # One call per passage, all at once: the grade of one passage must not depend on the others beside it.
        verdicts = await asyncio.gather(*(
            self._ask("grade_relevance", RELEVANCE_PROMPT, f"Question: {query}\n\n{passage_block(1, c.chunk)}",
                      RELEVANCE_SCHEMA, "relevant", usage)
            for c in candidates))
        return [DocumentVerdict(bool(v["relevant"]), float(bool(v["relevant"])), f"llm: {v['reason']}") for v in verdicts]

    async def answer(self, query: str, answer: str, context: list[common_pb2.ScoredChunk], usage: Usage) -> AnswerVerdict:
        passages = numbered_passages(context)
        user = f"Question: {query}\n\nPassages:\n{passages}\n\nAnswer:\n{answer}"
        verdict = await self._ask("grade_answer", ANSWER_PROMPT, user, ANSWER_SCHEMA, "supported", usage)
        return AnswerVerdict(bool(verdict["supported"]), bool(verdict["useful"]), float(bool(verdict["supported"])),
                             float(bool(verdict["useful"])), f"llm: {verdict['reason']}")
