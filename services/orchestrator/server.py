"""The Orchestrator gRPC service: runs a flow within the caller's deadline and streams its answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

import grpc
from opentelemetry import trace

from ragline.domain.answers import stream_pieces
from ragline.runtime.config import RuntimeSettings, load_settings
from ragline.runtime.deadlines import Budget
from ragline.runtime.server import bootstrap, serve
from ragline.runtime.streams import pieces_while_running
from ragline.runtime.tracing import current_trace_id
from ragline.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc
from services.orchestrator.config import OrchestratorSettings
from services.orchestrator.flows import FlowError, FlowRunner
from services.orchestrator.spend import TenantSpend
from services.orchestrator.stages import MeshStages, Stages
from services.orchestrator.websearch import WebSearch

tracer = trace.get_tracer("ragline.orchestrator")


class Orchestrator(orchestrator_pb2_grpc.OrchestratorServiceServicer):
    def __init__(self, settings: RuntimeSettings, runner: FlowRunner, finish_reserve_s: float) -> None:
        self.settings = settings
        self.runner = runner
        self.finish_reserve_s = finish_reserve_s

    async def _answer(self, query: orchestrator_pb2.FlowQuery, context: grpc.aio.ServicerContext,
                      deltas: asyncio.Queue[str] | None = None) -> common_pb2.Answer:
        s = self.settings
        budget = Budget.from_context(context, s.default_deadline_ms / 1000, s.deadline_margin_ms / 1000,
                                     reserve_s=self.finish_reserve_s)
        with tracer.start_as_current_span("orchestrator.flow") as span:
            span.set_attributes({"ragline.tenant": query.tenant,
                                 "ragline.requested_strategy": common_pb2.Strategy.Name(query.strategy)})
            try:
                answer = await self.runner.run(query, budget, deltas)
            except FlowError as exc:
                span.set_attribute("ragline.error", exc.message)
                await context.abort(exc.code, exc.message)
            answer.trace_id = current_trace_id()
        return answer

    async def RunFlow(self, request: orchestrator_pb2.RunFlowRequest, context: grpc.aio.ServicerContext) -> orchestrator_pb2.RunFlowResponse:
        return orchestrator_pb2.RunFlowResponse(answer=await self._answer(request.query, context))

    async def RunFlowStream(
        self, request: orchestrator_pb2.RunFlowStreamRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[orchestrator_pb2.RunFlowStreamResponse]:
        """The model's tokens as they come where the flow's last generation is its answer (standard, light,
        direct), else the checked answer a sentence at a time; then the final answer, whose text is authoritative."""
        deltas: asyncio.Queue[str] = asyncio.Queue()
        task = asyncio.create_task(self._answer(request.query, context, deltas))
        streamed = False
        async for piece in pieces_while_running(task, deltas):
            streamed = True
            yield orchestrator_pb2.RunFlowStreamResponse(delta=piece)
        answer = task.result()
        if not streamed:
            for piece in stream_pieces(answer.text):
                yield orchestrator_pb2.RunFlowStreamResponse(delta=piece)
        yield orchestrator_pb2.RunFlowStreamResponse(final=answer)


class Wiring:
    """The orchestrator and what it owns: its stage clients and the optional web search."""

    def __init__(self, servicer: Orchestrator, stages: Stages, web: WebSearch | None, spend: TenantSpend | None = None) -> None:
        self.servicer, self.stages, self.web, self.spend = servicer, stages, web, spend

    async def close(self) -> None:
        close = getattr(self.stages, "close", None)
        if close is not None:
            await close()
        if self.web is not None:
            await self.web.close()
        if self.spend is not None:
            await self.spend.close()


def build(settings: OrchestratorSettings, runtime: RuntimeSettings, stages: Stages | None = None) -> Wiring:
    """The servicer over the mesh's stages (or over `stages`, e.g. the benchmark's in-process ones)."""
    stages = stages if stages is not None else MeshStages(runtime)
    web = None
    if settings.web_search_api_key:
        web = WebSearch(settings.web_search_url, settings.web_search_api_key, settings.web_search_results, runtime)
    # Always: spend per tenant is a metric even without a cap (then Redis is not used).
    spend = TenantSpend(settings.redis_url, settings.tenant_model_tokens_per_day, settings.model_tokens_per_day)
    runner = FlowRunner(stages, settings, web, spend)
    return Wiring(Orchestrator(runtime, runner, settings.finish_reserve_ms / 1000), stages, web, spend)


async def main() -> None:
    runtime = bootstrap("orchestrator")
    settings = load_settings(OrchestratorSettings)
    wiring = build(settings, runtime)

    def register(server: grpc.aio.Server) -> Iterable[str]:
        orchestrator_pb2_grpc.add_OrchestratorServiceServicer_to_server(wiring.servicer, server)
        return [orchestrator_pb2.DESCRIPTOR.services_by_name["OrchestratorService"].full_name]

    await serve("orchestrator", settings.port, register, runtime, on_stop=wiring.close)
