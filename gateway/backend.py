"""What both front ends (HTTP and gRPC) do: authenticate, limit, answer (with the cache) and ingest."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
from opentelemetry import trace

from gateway.cache import AnswerCache
from gateway.config import ApiKeys, GatewaySettings
from gateway.limits import TokenBuckets
from ragline.domain.strategies import STRATEGIES
from ragline.runtime.clients import StageClient, StageUnavailable
from ragline.runtime.config import RuntimeSettings
from ragline.runtime.deadlines import Budget
from ragline.runtime.errors import StatusError
from ragline.runtime.metrics import CACHE
from ragline.runtime.tracing import current_trace_id
from ragline.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc, retrieval_pb2, retrieval_pb2_grpc

log = logging.getLogger(__name__)
tracer = trace.get_tracer("ragline.gateway")

class GatewayError(StatusError):
    """A request the gateway refuses or cannot serve."""


@dataclass
class Question:
    query: str
    strategy: int
    session_id: str
    filters: list[common_pb2.MetadataFilter]


class Backend:
    def __init__(self, settings: GatewaySettings, runtime: RuntimeSettings, keys: ApiKeys) -> None:
        self.settings = settings
        self.runtime = runtime
        self.tenants = keys.tenants()
        self.limits = TokenBuckets(settings.rate_limit_per_s, settings.rate_limit_burst)
        self.cache = AnswerCache(settings.redis_url, settings.cache_enabled)
        self.orchestrator = StageClient("orchestrator", orchestrator_pb2_grpc.OrchestratorServiceStub, runtime)
        self.retrieval = StageClient("retrieval", retrieval_pb2_grpc.RetrievalServiceStub, runtime)

    def authenticate(self, authorization: str | None) -> str:
        """The tenant of a valid 'Bearer <key>'; UNAUTHENTICATED or RESOURCE_EXHAUSTED otherwise."""
        scheme, _, key = (authorization or "").partition(" ")
        tenant = self.tenants.get(key.strip()) if scheme.lower() == "bearer" else None
        if tenant is None:
            raise GatewayError(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid API key: send 'Authorization: Bearer <key>'")
        if not self.limits.allow(key):
            raise GatewayError(grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limit exceeded for this API key; retry later")
        trace.get_current_span().set_attribute("ragline.tenant", tenant)
        return tenant

    def budget(self, timeout_ms: float | None, ingest: bool = False, clamp: bool = False) -> Budget:
        """A budget from the caller's timeout. An explicit timeout over the limit is an error, while a
        gRPC deadline over it (clamp=True) is shortened to the limit."""
        s = self.settings
        default, limit = (s.ingest_timeout_ms, s.max_ingest_timeout_ms) if ingest else (self.runtime.default_deadline_ms, s.max_timeout_ms)
        ms = default if timeout_ms is None else timeout_ms
        if clamp:
            ms = min(ms, limit)
        if not 0 < ms <= limit:
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, f"timeout must be within (0, {limit}] ms, got {ms:g}")
        return Budget(ms / 1000, self.runtime.deadline_margin_ms / 1000)

    def question(self, query: str, strategy: str | int, session_id: str,
                 filters: list[common_pb2.MetadataFilter]) -> Question:
        if not query.strip():
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        if len(query) > self.settings.max_query_chars:
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"query is {len(query)} characters; the limit is {self.settings.max_query_chars}")
        if isinstance(strategy, str):
            if strategy not in STRATEGIES:
                raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT,
                                   f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
            strategy = STRATEGIES[strategy]
        elif strategy not in (common_pb2.STRATEGY_UNSPECIFIED, *STRATEGIES.values()):
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, f"unknown strategy {strategy}")
        for f in filters:
            if not f.field or not f.values:
                raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, "a filter needs a field and at least one value")
        return Question(query, strategy or common_pb2.STRATEGY_AUTO, session_id, filters)

    def _flow_query(self, tenant: str, q: Question) -> orchestrator_pb2.FlowQuery:
        return orchestrator_pb2.FlowQuery(tenant=tenant, query=q.query, strategy=q.strategy,
                                          session_id=q.session_id, filters=q.filters)

    @staticmethod
    def _filters_key(q: Question) -> str:
        return ";".join(f"{f.field}={','.join(sorted(f.values))}" for f in sorted(q.filters, key=lambda f: f.field))

    async def answer(self, tenant: str, q: Question, budget: Budget, use_cache: bool = True) -> common_pb2.Answer:
        filters_key = self._filters_key(q)
        cached = await self.cache.get(tenant, q.strategy, q.query, filters_key) if use_cache else None
        if use_cache and self.cache.enabled:
            CACHE.labels("hit" if cached is not None else "miss").inc()
        if cached is not None:
            trace.get_current_span().set_attribute("ragline.cache_hit", True)
            cached.trace_id = current_trace_id()
            cached.cached = True
            return cached
        try:
            resp = await self.orchestrator.call("RunFlow", orchestrator_pb2.RunFlowRequest(query=self._flow_query(tenant, q)), budget)
        except StageUnavailable as exc:
            raise GatewayError(exc.code, f"cannot answer now: {exc}") from exc
        except grpc.aio.AioRpcError as exc:
            raise GatewayError(exc.code(), exc.details() or exc.code().name) from exc
        await self.cache.put(tenant, q.strategy, q.query, filters_key, resp.answer)
        return resp.answer

    async def answer_stream(self, tenant: str, q: Question, budget: Budget) -> AsyncIterator[orchestrator_pb2.RunFlowStreamResponse]:
        try:
            call = self.orchestrator.stream("RunFlowStream", orchestrator_pb2.RunFlowStreamRequest(query=self._flow_query(tenant, q)), budget)
            async for event in call:
                yield event
        except StageUnavailable as exc:
            raise GatewayError(exc.code, f"cannot answer now: {exc}") from exc
        except grpc.aio.AioRpcError as exc:
            raise GatewayError(exc.code(), exc.details() or exc.code().name) from exc

    async def ingest(self, tenant: str, documents: list[retrieval_pb2.Document], budget: Budget) -> retrieval_pb2.IngestResponse:
        if not documents:
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, "no documents given")
        if len(documents) > self.settings.max_documents:
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"{len(documents)} documents; the limit per request is {self.settings.max_documents}")
        try:
            resp = await self.retrieval.call("Ingest", retrieval_pb2.IngestRequest(tenant=tenant, documents=documents), budget)
        except StageUnavailable as exc:
            raise GatewayError(exc.code, f"cannot ingest now: {exc}") from exc
        except grpc.aio.AioRpcError as exc:
            raise GatewayError(exc.code(), exc.details() or exc.code().name) from exc
        finally:
            # Even a partly failed batch may have changed the tenant's documents.
            await self.cache.invalidate(tenant)
        return resp

    async def orchestrator_ready(self) -> bool:
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        try:
            resp = await health_pb2_grpc.HealthStub(self.orchestrator.channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
            return resp.status == health_pb2.HealthCheckResponse.SERVING
        except grpc.aio.AioRpcError:
            return False

    async def close(self) -> None:
        await self.cache.close()
        await self.orchestrator.close()
        await self.retrieval.close()
