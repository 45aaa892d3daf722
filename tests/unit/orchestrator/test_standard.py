"""Standard RAG."""

from __future__ import annotations

from ragline.v1 import common_pb2
from tests.unit.orchestrator.scripted import Scripted, run


async def test_standard_retrieves_reranks_and_generates():
    s = Scripted()
    answer = await run(s, "pool size?", common_pb2.STRATEGY_STANDARD)
    assert s.calls == ["search", "rerank", "generate:GENERATION_MODE_UNSPECIFIED"]
    assert answer.citations[0].chunk_id == "a" and answer.stage_calls == 3
    assert {t.stage for t in answer.timings} >= {"retrieve", "rerank", "generate"}
