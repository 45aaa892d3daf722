"""The state of one request as the flows see it: its budget, what has been found and what was decided."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from opentelemetry import trace

from ragline.domain.answers import NOT_FOUND, UNCERTAIN
from ragline.domain.text import detect_language
from ragline.runtime.deadlines import Budget
from ragline.runtime.errors import StatusError
from ragline.v1 import common_pb2, generator_pb2, orchestrator_pb2
from services.orchestrator.spend import Allowance

YES, NO, UNKNOWN = common_pb2.GRADE_YES, common_pb2.GRADE_NO, common_pb2.GRADE_UNSPECIFIED


class FlowError(StatusError):
    """A flow could not produce any answer."""


@dataclass
class Run:
    query: orchestrator_pb2.FlowQuery
    budget: Budget
    answer: common_pb2.Answer = field(default_factory=common_pb2.Answer)
    timings: dict[str, float] = field(default_factory=dict)
    seen: dict[str, common_pb2.ScoredChunk] = field(default_factory=dict)
    # Chunks a grader judged relevant: what a graded flow may answer from (everything seen still counts as retrieved).
    relevant: set[str] = field(default_factory=set)
    # The filters came from the router's reading of the question, not from the caller: they may be dropped.
    inferred_filters: bool = False
    # (sub-questions, kind) when the router already decomposed the question; None: ask the generator.
    decomposition: tuple[list[common_pb2.SubQuestion], str] | None = None
    # A streaming request's pieces of answer, as the final generation produces them (None: not streaming).
    deltas: asyncio.Queue[str] | None = None
    # What the tenant's model budget allows this run (services/orchestrator/spend.py).
    allowance: Allowance = field(default_factory=Allowance)

    @property
    def lang(self) -> str:
        return detect_language(self.query.query)

    def degrade(self, what: str) -> None:
        if what not in self.answer.degradations:
            self.answer.degradations.append(what)
            trace.get_current_span().add_event("ragline.degradation", {"what": what})

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[stage] = self.timings.get(stage, 0.0) + (time.perf_counter() - t0) * 1000

    def best_first(self) -> list[common_pb2.ScoredChunk]:
        """Everything retrieved so far, best score first."""
        return sorted(self.seen.values(), key=lambda c: c.score, reverse=True)

    def remember(self, chunks: list[common_pb2.ScoredChunk]) -> None:
        for c in chunks:
            best = self.seen.get(c.chunk.id)
            if best is None or c.score > best.score:
                self.seen[c.chunk.id] = c

    def set_answer(self, gen: generator_pb2.GenerateResponse) -> None:
        self.answer.text = gen.answer
        del self.answer.citations[:]
        self.answer.citations.extend(gen.citations)
        self.answer.not_found = gen.not_found

    def mark_uncertain(self) -> None:
        """Flag the answer as not fully supported, and say so in its text once."""
        self.answer.uncertain = True
        if not self.answer.text.endswith(UNCERTAIN[self.lang]):
            self.answer.text = f"{self.answer.text} {UNCERTAIN[self.lang]}"

    def answer_not_found(self) -> None:
        self.answer.text, self.answer.not_found = NOT_FOUND[self.lang], True


def normalize(question: str) -> str:
    """A question's words only, lower-cased: what makes two sub-questions or hops the same."""
    return re.sub(r"\W+", " ", question.lower()).strip()
