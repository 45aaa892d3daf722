"""Standard RAG."""

from __future__ import annotations

from ragline.domain.answers import UNCERTAIN
from ragline.runtime.deadlines import Budget
from ragline.v1 import common_pb2, generator_pb2
from tests.unit.orchestrator.scripted import NO, Scripted, run


async def test_standard_retrieves_reranks_and_generates():
    s = Scripted()
    answer = await run(s, "pool size?", common_pb2.STRATEGY_STANDARD)
    assert s.calls == ["search", "rerank", "generate:GENERATION_MODE_UNSPECIFIED"]
    assert answer.citations[0].chunk_id == "a" and answer.stage_calls == 3
    assert {t.stage for t in answer.timings} >= {"retrieve", "rerank", "generate"}


async def test_an_answer_that_cites_no_passage_is_support_checked_and_marked_uncertain_when_unsupported():
    s = Scripted()
    s.supported = [NO]

    async def uncited(req: generator_pb2.GenerateRequest, budget: Budget) -> generator_pb2.GenerateResponse:
        s.calls.append("generate")
        return generator_pb2.GenerateResponse(answer="The pool holds twelve connections.", uncited=True)

    s.generate = uncited  # type: ignore[method-assign]
    answer = await run(s, "What is the default pool size?", common_pb2.STRATEGY_STANDARD)
    assert "grade_answer" in s.calls and answer.uncertain
    assert answer.text == f"The pool holds twelve connections. {UNCERTAIN['en']}"
    assert any("cites no passage; support checked: not supported" in d for d in answer.degradations)
