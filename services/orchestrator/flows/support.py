"""The answer check of the graded flows (self-RAG and combined): an unsupported answer is regenerated once and
then marked uncertain; an answer that is not useful is improved once."""

from __future__ import annotations

from ragline.domain.answers import UNCERTAIN
from ragline.v1 import common_pb2, generator_pb2
from services.orchestrator.flows.calls import StageCalls
from services.orchestrator.flows.state import NO, Run


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
        run.answer.uncertain = True
        run.answer.text = f"{run.answer.text} {UNCERTAIN[run.lang]}"
    if verdict.useful == NO and verdict.supported != NO and not run.budget.expired():
        improved = await calls.generate(run, generator_pb2.GenerationInput(
            query=query, context=context, mode=generator_pb2.GENERATION_MODE_REVISE, previous_answer=gen.answer))
        if not improved.not_found:
            run.set_answer(improved)
            verdict = await calls.grade_answer(run, query, improved.answer, context) or verdict
    run.answer.grades.supported = verdict.supported
    run.answer.grades.useful = verdict.useful
