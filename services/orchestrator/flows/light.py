"""The light flows the router picks for what needs little or no retrieval: open or creative requests get a
few unreranked passages; greetings and questions about the assistant get no retrieval at all."""

from __future__ import annotations

from ragline.v1 import generator_pb2
from services.orchestrator.flows.calls import StageCalls
from services.orchestrator.flows.standard import answer_from
from services.orchestrator.flows.state import Run


async def light(calls: StageCalls, run: Run) -> None:
    chunks = await calls.retrieve(run, run.query.query, calls.settings.light_top_k, rerank=False)
    await answer_from(calls, run, chunks, final=True)


async def direct(calls: StageCalls, run: Run) -> None:
    gen = await calls.generate(run, generator_pb2.GenerationInput(query=run.query.query,
                                                                   mode=generator_pb2.GENERATION_MODE_DIRECT), final=True)
    run.answer.text = gen.answer
