"""What both front ends (HTTP and gRPC) do: authenticate, limit, answer (with the cache), ingest and manage
documents. The tenant and the access groups always come from the API key."""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry import trace
from prometheus_client import Counter

from gateway.cache import AnswerCache
from gateway.config import ApiKeys, Caller, GatewaySettings
from gateway.jobs import Job, JobStore
from gateway.limits import RateLimiter
from ragline.domain.documents import SyncPlan, content_hash, plan_sync
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
REJECTED_KEYS = Counter("ragline_gateway_rejected_keys_total",
                        "Requests without a valid API key, by outcome (unauthenticated: 401; rate_limited: 429)", ["outcome"])

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
        self.callers = keys.callers()
        self.limits = RateLimiter(settings.redis_url, settings.rate_limit_per_s, settings.rate_limit_burst)
        self.bad_keys = RateLimiter(settings.redis_url, settings.bad_key_rate_per_s, settings.bad_key_burst, kind="bad-key")
        self.cache = AnswerCache(settings.redis_url, settings.cache_enabled)
        self.jobs = JobStore(settings.redis_url, bool(settings.redis_url), settings.job_ttl_s)
        self.orchestrator = StageClient("orchestrator", orchestrator_pb2_grpc.OrchestratorServiceStub, runtime)
        self.retrieval = StageClient("retrieval", retrieval_pb2_grpc.RetrievalServiceStub, runtime)

    def _caller(self, key: str) -> Caller | None:
        """The key's caller, compared in constant time with every configured key (no timing tells a near miss)."""
        found = None
        for known, caller in self.callers.items():
            if hmac.compare_digest(known.encode(), key.encode()):
                found = caller
        return found

    async def authenticate(self, authorization: str | None, address: str) -> Caller:
        """The tenant and groups of a valid 'Bearer <key>'; UNAUTHENTICATED or RESOURCE_EXHAUSTED otherwise.
        address: the client's, which requests without a valid key are counted and limited by."""
        scheme, _, key = (authorization or "").partition(" ")
        caller = self._caller(key.strip()) if scheme.lower() == "bearer" else None
        if caller is None:
            if not await self.bad_keys.allow(address):
                REJECTED_KEYS.labels("rate_limited").inc()
                raise GatewayError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                   "too many requests without a valid API key from this address; retry later")
            REJECTED_KEYS.labels("unauthenticated").inc()
            raise GatewayError(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid API key: send 'Authorization: Bearer <key>'")
        if not await self.limits.allow(key):
            raise GatewayError(grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limit exceeded for this API key; retry later")
        trace.get_current_span().set_attribute("ragline.tenant", caller.tenant)
        return caller

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

    def _flow_query(self, caller: Caller, q: Question) -> orchestrator_pb2.FlowQuery:
        return orchestrator_pb2.FlowQuery(tenant=caller.tenant, query=q.query, strategy=q.strategy,
                                          session_id=q.session_id, filters=q.filters, access_groups=caller.groups)

    @staticmethod
    def _scope_key(caller: Caller, q: Question) -> str:
        """What besides the question decides an answer: the filters and the key's groups (two keys of one tenant
        with different groups may read different documents, so they never share a cached answer)."""
        filters = ";".join(f"{f.field}={','.join(sorted(f.values))}" for f in sorted(q.filters, key=lambda f: f.field))
        return f"{filters}\x00groups={'|'.join(caller.groups)}"

    async def answer(self, caller: Caller, q: Question, budget: Budget, use_cache: bool = True) -> common_pb2.Answer:
        tenant, filters_key = caller.tenant, self._scope_key(caller, q)
        cached = await self.cache.get(tenant, q.strategy, q.query, filters_key) if use_cache else None
        if use_cache and self.cache.enabled:
            CACHE.labels("hit" if cached is not None else "miss").inc()
        if cached is not None:
            trace.get_current_span().set_attribute("ragline.cache_hit", True)
            cached.trace_id = current_trace_id()
            cached.cached = True
            return cached
        try:
            resp = await self.orchestrator.call("RunFlow", orchestrator_pb2.RunFlowRequest(query=self._flow_query(caller, q)), budget)
        except StageUnavailable as exc:
            raise GatewayError(exc.code, f"cannot answer now: {exc}") from exc
        except grpc.aio.AioRpcError as exc:
            raise GatewayError(exc.code(), exc.details() or exc.code().name) from exc
        await self.cache.put(tenant, q.strategy, q.query, filters_key, resp.answer)
        return resp.answer

    async def answer_stream(self, caller: Caller, q: Question, budget: Budget) -> AsyncIterator[orchestrator_pb2.RunFlowStreamResponse]:
        try:
            call = self.orchestrator.stream("RunFlowStream", orchestrator_pb2.RunFlowStreamRequest(query=self._flow_query(caller, q)), budget)
            async for event in call:
                yield event
        except StageUnavailable as exc:
            raise GatewayError(exc.code, f"cannot answer now: {exc}") from exc
        except grpc.aio.AioRpcError as exc:
            raise GatewayError(exc.code(), exc.details() or exc.code().name) from exc

    async def _retrieval(self, method: str, request: Any, budget: Budget, doing: str) -> Any:
        try:
            return await self.retrieval.call(method, request, budget)
        except StageUnavailable as exc:
            raise GatewayError(exc.code, f"cannot {doing} now: {exc}") from exc
        except grpc.aio.AioRpcError as exc:
            raise GatewayError(exc.code(), exc.details() or exc.code().name) from exc

    def check_ingest(self, caller: Caller, documents: list[retrieval_pb2.Document]) -> None:
        """INVALID_ARGUMENT or PERMISSION_DENIED for a batch that cannot be ingested at all."""
        if not documents:
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, "no documents given")
        if len(documents) > self.settings.max_documents:
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"{len(documents)} documents; the limit per request is {self.settings.max_documents}")
        for doc in documents:
            # A key gives a document only groups it has itself, so that it can always read (and sync) what it wrote.
            foreign = sorted(set(doc.access_groups) - set(caller.groups))
            if foreign:
                raise GatewayError(grpc.StatusCode.PERMISSION_DENIED,
                                   f"document {doc.id!r}: this API key is not in access group(s) {', '.join(foreign)}")

    async def ingest(self, caller: Caller, documents: list[retrieval_pb2.Document], budget: Budget) -> retrieval_pb2.IngestResponse:
        self.check_ingest(caller, documents)
        try:
            return await self._retrieval("Ingest", retrieval_pb2.IngestRequest(tenant=caller.tenant, documents=documents),
                                         budget, "ingest")
        finally:
            # Even a partly failed batch may have changed the tenant's documents.
            await self.cache.invalidate(caller.tenant)

    async def list_documents(self, caller: Caller, sync_root: str, page_size: int, page_token: str,
                             budget: Budget) -> retrieval_pb2.ListIndexedDocumentsResponse:
        request = retrieval_pb2.ListIndexedDocumentsRequest(tenant=caller.tenant, access_groups=caller.groups,
                                                            sync_root=sync_root, page_size=page_size, page_token=page_token)
        return await self._retrieval("ListIndexedDocuments", request, budget, "list documents")

    async def get_document(self, caller: Caller, document_id: str, budget: Budget) -> retrieval_pb2.DocumentInfo:
        request = retrieval_pb2.GetIndexedDocumentRequest(tenant=caller.tenant, document_id=document_id, access_groups=caller.groups)
        return (await self._retrieval("GetIndexedDocument", request, budget, "read documents")).document

    async def delete_document(self, caller: Caller, document_id: str, budget: Budget) -> int:
        """The chunks deleted; NOT_FOUND for a document the key cannot see."""
        if not document_id.strip():
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, "document id is empty")
        resp = await self.delete_documents(caller, [document_id], budget)
        if not resp.deleted:
            raise GatewayError(grpc.StatusCode.NOT_FOUND, f"no document {document_id!r}")
        return int(resp.chunks_deleted)

    async def sync_plan(self, caller: Caller, sync_root: str, documents: list[retrieval_pb2.Document],
                        budget: Budget) -> SyncPlan:
        """What a sync of these documents (a folder's files) into sync_root would change."""
        if not sync_root.strip():
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, "sync_root is empty: name the folder this sync keeps in step")
        indexed: dict[str, str] = {}
        token = ""
        while True:
            page = await self.list_documents(caller, sync_root, 1000, token, budget)
            indexed.update({d.id: d.content_hash for d in page.documents})
            token = page.next_page_token
            if not token:
                break
        local = {d.id: content_hash(d) for d in documents}
        return plan_sync(local, indexed)

    async def delete_documents(self, caller: Caller, document_ids: list[str], budget: Budget) -> retrieval_pb2.DeleteDocumentsResponse:
        """Delete those of the documents the key can read; the answer cache of the tenant goes with them."""
        if not document_ids:
            return retrieval_pb2.DeleteDocumentsResponse()
        request = retrieval_pb2.DeleteDocumentsRequest(tenant=caller.tenant, document_ids=document_ids, access_groups=caller.groups)
        try:
            return await self._retrieval("DeleteDocuments", request, budget, "delete documents")
        finally:
            await self.cache.invalidate(caller.tenant)

    async def start_job(self, caller: Caller, documents: list[retrieval_pb2.Document], deletions: Sequence[str] = ()) -> Job:
        """Ingest the documents in the background (then delete `deletions`, a sync's); the job to read progress from."""
        then = (lambda: self.delete_documents(caller, list(deletions), self.budget(None))) if deletions else None
        return await self.jobs.start(caller.tenant, documents,
                                     lambda batch: self.ingest(caller, batch, self.budget(None, ingest=True)), then=then)

    async def orchestrator_ready(self) -> bool:
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        try:
            resp = await health_pb2_grpc.HealthStub(self.orchestrator.channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
            return resp.status == health_pb2.HealthCheckResponse.SERVING
        except grpc.aio.AioRpcError:
            return False

    async def close(self) -> None:
        await self.cache.close()
        await self.jobs.close()
        await self.limits.close()
        await self.orchestrator.close()
        await self.retrieval.close()
