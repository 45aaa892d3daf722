"""The Router gRPC service."""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from opentelemetry import trace

from ragline.runtime.config import load_settings
from ragline.runtime.server import bootstrap, serve
from ragline.v1 import common_pb2, router_pb2, router_pb2_grpc
from services.router.config import RouterSettings
from services.router.logic import route_by_rules

tracer = trace.get_tracer("ragline.router")


class Router(router_pb2_grpc.RouterServiceServicer):
    async def Route(self, request: router_pb2.RouteRequest, context: grpc.aio.ServicerContext) -> router_pb2.RouteResponse:
        if not request.query.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        with tracer.start_as_current_span("router.classify") as span:
            route = route_by_rules(request.query)
            span.set_attributes({
                "ragline.query_type": common_pb2.QueryType.Name(route.query_type),
                "ragline.strategy": common_pb2.Strategy.Name(route.strategy),
                "ragline.route_reason": route.reason,
                "ragline.intent": route.intent,
            })
        return router_pb2.RouteResponse(
            query_type=route.query_type, strategy=route.strategy, reason=route.reason,
            confidence=route.confidence, language=route.language, intent=route.intent, decided_by="rules",
            filters=[common_pb2.MetadataFilter(field=k, values=v) for k, v in route.filters.items()],
        )


async def main() -> None:
    runtime = bootstrap("router")
    settings = load_settings(RouterSettings)

    def register(server: grpc.aio.Server) -> Iterable[str]:
        router_pb2_grpc.add_RouterServiceServicer_to_server(Router(), server)
        return [router_pb2.DESCRIPTOR.services_by_name["RouterService"].full_name]

    await serve("router", settings.port, register, runtime)
