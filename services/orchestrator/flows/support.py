"""The answer check of the graded flows (self-RAG and combined): an unsupported answer is regenerated once and
then marked uncertain; an answer that is not useful is improved once."""

from __future__ import annotations

from ragline.v1 import common_pb2, generator_pb2
from services.orchestrator.flows.calls import StageCalls, quote_passage
from services.orchestrator.flows.state import NO, Run

# The generator found nothing to say although the grader had judged passages relevant.
DISAGREE = "grades and answer disagreed (passages graded relevant, no answer found): "


async def agree_with_grades(calls: StageCalls, run: Run, relevant: list[common_pb2.ScoredChunk],
                            gen: generator_pb2.GenerateResponse) -> generator_pb2.GenerateResponse:
    """An answer never says "not found" while its passages stand graded relevant. The passages are graded again by
    what they say of the question's words (and the tenant's synonyms) alone, without the reranker's probability,
    which may rest on one shared name: still relevant, the best is quoted; else the grade becomes NO."""
    if not gen.not_found or not relevant:
        return gen
    plain = []
    for c in relevant:
        copy = common_pb2.ScoredChunk()
        copy.CopyFrom(c)
        copy.scores.ClearField("relevance_probability")
        plain.append(copy)
    still, grade = await calls.grade_documents(run, run.query.query, plain)
    if grade == NO:
        run.answer.grades.relevant = NO
        run.degrade(DISAGREE + "graded again by the question's words, none relevant: not found")
        return gen
    quoted = quote_passage(next(c for c in relevant if c.chunk.id == still[0].chunk.id))
    run.degrade(DISAGREE + "quoted the best passage graded relevant")
    run.set_answer(quoted)
    return quoted


async def check_support(calls: StageCalls, run: Run, context: list[common_pb2.ScoredChunk],
                        gen: generator_pb2.GenerateResponse) -> None:
    query = run.query.query
    verdict = await calls.grade_answer(run, query, gen.answer, context)
    if verdict is None:
        return
    if verdict.supported == NO and not run.budget.expired():
        gen = await calls.generate(run, generator_pb2.GenerationInput(
            query=query, context=context, mode=generator_pb2.GENERATION_MODE_REVISE, previous_answer=gen.answer))
        run.set_answer(gen)
        verdict = await calls.grade_answer(run, query, gen.answer, context) or verdict
    if verdict.supported == NO:
        run.mark_uncertain()
    if verdict.useful == NO and verdict.supported != NO and not run.budget.expired():
        improved = await calls.generate(run, generator_pb2.GenerationInput(
            query=query, context=context, mode=generator_pb2.GENERATION_MODE_REVISE, previous_answer=gen.answer))
        if not improved.not_found:
            run.set_answer(improved)
            verdict = await calls.grade_answer(run, query, improved.answer, context) or verdict
    run.answer.grades.supported = verdict.supported
    run.answer.grades.useful = verdict.useful
