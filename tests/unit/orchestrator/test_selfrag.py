"""Self-RAG: bounded retries, rewrites, regeneration and improvement."""

from __future__ import annotations

from ragline.domain.answers import NOT_FOUND, UNCERTAIN
from ragline.v1 import common_pb2
from tests.unit.orchestrator.scripted import NO, SETTINGS, YES, Scripted, chunk, run


async def test_selfrag_retries_are_bounded_and_end_in_not_found():
    s = Scripted()
    s.relevant = set()
    answer = await run(s, "Redis 分片数量是多少？", common_pb2.STRATEGY_SELFRAG)
    assert s.calls.count("search") == SETTINGS.max_retries + 1
    assert len(answer.rewrites) == SETTINGS.max_retries
    assert answer.not_found and answer.text == NOT_FOUND["zh"]
    assert answer.grades.relevant == NO


async def test_selfrag_rewrite_finds_relevant_on_retry():
    s = Scripted()
    s.relevant = {"b"}
    s.search_by_query["rewrite 0"] = [chunk("b", "Pool size is 10.")]
    answer = await run(s, "pool size?", common_pb2.STRATEGY_SELFRAG)
    assert answer.rewrites == ["rewrite 0"] and answer.grades.relevant == YES
    assert answer.citations[0].chunk_id == "b"
    # The rewrite only widens the search: its results are ranked (and so graded) against the question itself.
    assert s.searched == ["pool size?", "rewrite 0"] and s.ranked_for == ["pool size?", "pool size?"]


async def test_selfrag_unsupported_regenerates_once_then_marks_uncertain():
    s = Scripted()
    s.supported = [NO, NO]
    answer = await run(s, "pool size?", common_pb2.STRATEGY_SELFRAG)
    assert s.calls.count("generate:GENERATION_MODE_REVISE") == 1
    assert answer.uncertain and answer.text.endswith(UNCERTAIN["en"])
    assert answer.grades.supported == NO


async def test_selfrag_not_useful_is_improved_once():
    s = Scripted()
    s.useful = NO
    answer = await run(s, "pool size?", common_pb2.STRATEGY_SELFRAG)
    assert s.calls.count("generate:GENERATION_MODE_REVISE") == 1
    assert answer.grades.useful == NO and not answer.uncertain
