"""The Router gRPC service."""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from opentelemetry import trace

from ragline.domain.decomposition import decompose
from ragline.llm import LlmClient, Usage, llm_configured
from ragline.runtime.config import load_settings
from ragline.runtime.server import bootstrap, serve
from ragline.v1 import common_pb2, router_pb2, router_pb2_grpc
from services.router.backends import RouterBackend
from services.router.classifier import MultiHopClassifier
from services.router.config import RouterSettings

tracer = trace.get_tracer("ragline.router")


class Router(router_pb2_grpc.RouterServiceServicer):
    def __init__(self, backend: RouterBackend) -> None:
        self.backend = backend

    async def Route(self, request: router_pb2.RouteRequest, context: grpc.aio.ServicerContext) -> router_pb2.RouteResponse:
        if not request.query.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        usage = Usage()
        with tracer.start_as_current_span("router.classify") as span:
            route, decided_by = await self.backend.route(request.query, usage)
            span.set_attributes({
                "ragline.decided_by": decided_by,
                "ragline.query_type": common_pb2.QueryType.Name(route.query_type),
                "ragline.strategy": common_pb2.Strategy.Name(route.strategy),
                "ragline.route_reason": route.reason,
                "ragline.intent": route.intent,
            })
        response = router_pb2.RouteResponse(
            query_type=route.query_type, strategy=route.strategy, reason=route.reason,
            confidence=route.confidence, language=route.language, intent=route.intent, decided_by=decided_by,
            usage=usage.to_proto(),
            filters=[common_pb2.MetadataFilter(field=k, values=v) for k, v in route.filters.items()],
        )
        # A multi-hop route comes with its decomposition, saving the flow a call: the model's, when it routed, or
        # without an LLM the same heuristic the generator would run. When rules routed but an LLM is configured,
        # the generator's model decomposes.
        subs, kind = route.sub_questions, route.decomposition
        if route.strategy == common_pb2.STRATEGY_MULTIHOP and not subs and self.backend.llm is None:
            subs, kind = decompose(request.query, self.backend.max_sub_questions)
        if route.strategy == common_pb2.STRATEGY_MULTIHOP and subs:
            response.decomposition = kind
            response.sub_questions.extend(common_pb2.SubQuestion(text=t, depends_on=d) for t, d in subs)
        return response


def build(settings: RouterSettings) -> Router:
    """The servicer: rules, the learned classifier, and an LLM when one is configured."""
    llm = LlmClient.for_stage(settings) if llm_configured() else None
    return Router(RouterBackend(MultiHopClassifier(), llm, settings.fast_path_confidence, settings.multihop_threshold,
                                settings.max_sub_questions))


async def main() -> None:
    runtime = bootstrap("router")
    settings = load_settings(RouterSettings)
    servicer = build(settings)

    def register(server: grpc.aio.Server) -> Iterable[str]:
        router_pb2_grpc.add_RouterServiceServicer_to_server(servicer, server)
        return [router_pb2.DESCRIPTOR.services_by_name["RouterService"].full_name]

    await serve("router", settings.port, register, runtime)
