"""Self-RAG: bounded retries, rewrites, regeneration and improvement."""

from __future__ import annotations

from ragline.domain.answers import NOT_FOUND, UNCERTAIN
from ragline.runtime.deadlines import Budget
from ragline.v1 import common_pb2, generator_pb2, grader_pb2
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


async def test_passages_graded_relevant_are_quoted_when_the_generator_finds_no_answer_and_the_answer_says_so():
    s = Scripted()

    async def finds_nothing(req: generator_pb2.GenerateRequest, budget: Budget) -> generator_pb2.GenerateResponse:
        s.calls.append("generate")
        return generator_pb2.GenerateResponse(answer=NOT_FOUND["zh"], not_found=True)

    s.generate = finds_nothing  # type: ignore[method-assign]
    answer = await run(s, "线上Redis挂了怎么办？", common_pb2.STRATEGY_SELFRAG)
    assert answer.grades.relevant == YES and not answer.not_found
    assert answer.text.startswith("HikariCP default pool size is 10.") and answer.citations[0].chunk_id == "a"
    assert any("graded relevant" in d for d in answer.degradations)


async def test_passages_relevant_only_by_the_rerankers_probability_are_graded_again_and_the_answer_stays_not_found():
    s = Scripted()
    s.results[0].scores.relevance_probability = 0.9

    async def by_probability(req: grader_pb2.GradeDocumentsRequest, budget: Budget) -> grader_pb2.GradeDocumentsResponse:
        s.calls.append("grade_documents")
        return grader_pb2.GradeDocumentsResponse(grades=[grader_pb2.DocumentGrade(
            chunk_id=c.chunk.id, relevant=YES if c.scores.HasField("relevance_probability") else NO) for c in req.candidates])

    async def finds_nothing(req: generator_pb2.GenerateRequest, budget: Budget) -> generator_pb2.GenerateResponse:
        return generator_pb2.GenerateResponse(answer=NOT_FOUND["zh"], not_found=True)

    s.grade_documents = by_probability  # type: ignore[method-assign]
    s.generate = finds_nothing  # type: ignore[method-assign]
    answer = await run(s, "Redis 集群的分片数量是多少？", common_pb2.STRATEGY_SELFRAG)
    assert answer.not_found and answer.grades.relevant == NO and not answer.citations
    assert s.calls.count("grade_documents") == 2
    assert any("none relevant" in d for d in answer.degradations)
