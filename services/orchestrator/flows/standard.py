"""Standard RAG: hybrid search, rerank to top k, answer with citations."""

from __future__ import annotations

from ragline.v1 import common_pb2, generator_pb2
from services.orchestrator.flows.calls import StageCalls
from services.orchestrator.flows.state import Run


async def standard(calls: StageCalls, run: Run) -> None:
    chunks = await calls.retrieve(run, run.query.query, calls.settings.top_k)
    await answer_from(calls, run, chunks, final=True)


async def answer_from(calls: StageCalls, run: Run, chunks: list[common_pb2.ScoredChunk],
                      final: bool = False) -> generator_pb2.GenerateResponse:
    """Answer the question from these passages; "not found", with no generator call, when there are none.
    final: nothing checks the answer after this, so a streaming request gets its tokens as they come."""
    run.remember(chunks)
    if not chunks:
        run.answer_not_found()
        return generator_pb2.GenerateResponse(answer=run.answer.text, not_found=True)
    gen = await calls.generate(run, generator_pb2.GenerationInput(query=run.query.query, context=chunks), final=final)
    run.set_answer(gen)
    return gen
