"""The Retrieval gRPC service: Search (Weaviate native hybrid) and Ingest."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass

import grpc
import numpy as np
import weaviate
from opentelemetry import trace
from weaviate.classes.query import HybridFusion

from ragline.runtime.config import load_settings
from ragline.runtime.server import bootstrap, serve
from ragline.text import detect_language
from ragline.v1 import common_pb2, retrieval_pb2, retrieval_pb2_grpc
from services.retrieval.chunking import ChunkingOptions, chunk_document, detect_content_type
from services.retrieval.config import RetrievalSettings
from services.retrieval.embedder import Embedder, load_embedder
from services.retrieval.store import TENANT_PATTERN, ChunkStore, Hit, StoredChunk

tracer = trace.get_tracer("ragline.retrieval")

_FUSIONS = {
    retrieval_pb2.FUSION_TYPE_UNSPECIFIED: HybridFusion.RELATIVE_SCORE,
    retrieval_pb2.FUSION_TYPE_RELATIVE_SCORE: HybridFusion.RELATIVE_SCORE,
    retrieval_pb2.FUSION_TYPE_RANKED: HybridFusion.RANKED,
}
_SEARCHABLE = {"title", "text", "title_zh", "text_zh"}
DEFAULT_QUERY_PROPERTIES = ["title", "text", "title_zh", "text_zh"]


class InvalidArgument(ValueError):
    pass


@dataclass
class PreparedDocument:
    document_id: str
    lang: str
    content_type: str
    chunks: list[StoredChunk]


def validate_tenant(tenant: str) -> str:
    if not TENANT_PATTERN.match(tenant):
        raise InvalidArgument(f"bad tenant name {tenant!r}: use 1-64 letters, digits, '-' or '_'")
    return tenant


def to_scored_chunk(tenant: str, hit: Hit) -> common_pb2.ScoredChunk:
    c = hit.chunk
    return common_pb2.ScoredChunk(
        chunk=common_pb2.Chunk(
            id=hit.uuid, document_id=c.document_id, tenant=tenant, title=c.title, text=c.text,
            source=c.source, metadata=c.metadata, chunk_index=c.chunk_index,
        ),
        score=hit.score,
        scores=common_pb2.ScoreBreakdown(bm25=hit.bm25, vector=hit.vector, fused=hit.score, explain=hit.explain),
    )


class Retrieval(retrieval_pb2_grpc.RetrievalServiceServicer):
    def __init__(self, settings: RetrievalSettings, store: ChunkStore, embedder: Embedder) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.chunking = ChunkingOptions(settings.chunk_max_chars, settings.chunk_min_chars, settings.chunk_overlap_chars)

    @staticmethod
    async def _check_tenant(tenant: str, context: grpc.aio.ServicerContext) -> None:
        try:
            validate_tenant(tenant)
        except InvalidArgument as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

    def _search_args(self, request: retrieval_pb2.SearchRequest) -> tuple[float, list[str], int, dict[str, list[str]]]:
        s = self.settings
        validate_tenant(request.tenant)
        if not request.query.strip():
            raise InvalidArgument("query is empty")
        if len(request.query) > s.max_query_chars:
            raise InvalidArgument(f"query is {len(request.query)} characters; the limit is {s.max_query_chars}")
        alpha = request.alpha if request.HasField("alpha") else s.tenant_alpha.get(request.tenant, s.default_alpha)
        if not 0.0 <= alpha <= 1.0:
            raise InvalidArgument(f"alpha must be within [0, 1], got {alpha}")
        limit = request.limit or s.default_limit
        if not 1 <= limit <= s.max_limit:
            raise InvalidArgument(f"limit must be within [1, {s.max_limit}], got {limit}")
        props = []
        for qp in request.query_properties:
            if qp.name not in _SEARCHABLE:
                raise InvalidArgument(f"unknown query property {qp.name!r}; searchable: {sorted(_SEARCHABLE)}")
            props.append(f"{qp.name}^{qp.boost:g}" if qp.boost and qp.boost != 1 else qp.name)
        filters: dict[str, list[str]] = {}
        for f in request.filters:
            if not f.field or not f.values:
                raise InvalidArgument("a metadata filter needs a field and at least one value")
            filters.setdefault(f.field, []).extend(f.values)
        return alpha, props or DEFAULT_QUERY_PROPERTIES, limit, filters

    async def Search(self, request: retrieval_pb2.SearchRequest, context: grpc.aio.ServicerContext) -> retrieval_pb2.SearchResponse:
        try:
            alpha, props, limit, filters = self._search_args(request)
        except InvalidArgument as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        fusion = _FUSIONS.get(request.fusion)
        if fusion is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown fusion type {request.fusion}")
        with tracer.start_as_current_span("retrieval.search") as span:
            span.set_attributes({"ragline.tenant": request.tenant, "ragline.alpha": alpha, "ragline.top_k": limit,
                                 "ragline.fusion": fusion.value, "ragline.filters": str(filters)})
            t0 = time.perf_counter()
            vector = None
            if alpha > 0:  # pure BM25 needs no query vector
                with tracer.start_as_current_span("retrieval.embed_query"):
                    vector = (await asyncio.to_thread(self.embedder.embed_queries, [request.query]))[0]
            t1 = time.perf_counter()
            with tracer.start_as_current_span("weaviate.hybrid"):
                hits = await self.store.hybrid(
                    request.tenant, request.query, vector, alpha, fusion, props, limit,
                    request.max_vector_distance if request.HasField("max_vector_distance") else None, filters,
                )
            t2 = time.perf_counter()
            span.set_attribute("ragline.results", len(hits))
        return retrieval_pb2.SearchResponse(
            results=[to_scored_chunk(request.tenant, h) for h in hits],
            alpha=alpha,
            timings=[
                common_pb2.StageTiming(stage="embed", millis=(t1 - t0) * 1000),
                common_pb2.StageTiming(stage="weaviate_hybrid", millis=(t2 - t1) * 1000),
            ],
        )

    async def Ingest(self, request: retrieval_pb2.IngestRequest, context: grpc.aio.ServicerContext) -> retrieval_pb2.IngestResponse:
        await self._check_tenant(request.tenant, context)
        if not request.documents:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no documents to ingest")
        results = [retrieval_pb2.DocumentResult(document_id=doc.id) for doc in request.documents]
        with tracer.start_as_current_span("retrieval.ingest") as span:
            span.set_attributes({"ragline.tenant": request.tenant, "ragline.documents": len(request.documents)})
            prepared = [self._prepare(doc, result) for doc, result in zip(request.documents, results, strict=True)]
            chunks = [c for p in prepared if p for c in p.chunks]
            vectors = await self._embed_passages(chunks)
            offset = 0
            for prep, result in zip(prepared, results, strict=True):
                if prep is None:
                    continue
                doc_vectors = vectors[offset : offset + len(prep.chunks)]
                offset += len(prep.chunks)
                try:
                    result.chunks = await self.store.write_document(
                        request.tenant, prep.document_id, prep.chunks, doc_vectors, prep.lang, prep.content_type)
                except Exception as exc:  # one bad document must not abort the batch
                    result.error = f"{type(exc).__name__}: {exc}"
            response = retrieval_pb2.IngestResponse(results=results)
            response.documents_failed = sum(1 for r in results if r.error)
            response.chunks_written = sum(r.chunks for r in results if not r.error)
            span.set_attributes({"ragline.chunks_written": response.chunks_written,
                                 "ragline.documents_failed": response.documents_failed})
        return response

    def _prepare(self, doc: retrieval_pb2.Document, result: retrieval_pb2.DocumentResult) -> PreparedDocument | None:
        """Validate and chunk one document; None (with result.error set) when it cannot be ingested."""
        if not doc.id.strip():
            result.error = "document id is empty"
            return None
        if not doc.text.strip():
            result.error = "document text is empty"
            return None
        content_type = doc.content_type or detect_content_type(doc.source, doc.text)
        lang = detect_language(doc.text)
        metadata = {**doc.metadata, "lang": lang, "doc_type": content_type}
        if doc.source:
            metadata["source"] = doc.source
        sections = chunk_document(doc.text, doc.title, content_type, self.chunking)
        chunks = [StoredChunk(doc.id, i, sec.title or doc.title, sec.text, doc.source, metadata) for i, sec in enumerate(sections)]
        return PreparedDocument(doc.id, lang, content_type, chunks)

    async def _embed_passages(self, chunks: list[StoredChunk]) -> np.ndarray:
        """Embed in batches, each in a worker thread, so the event loop keeps serving between batches."""
        batch = self.settings.embed_batch
        with tracer.start_as_current_span("retrieval.embed_passages") as span:
            span.set_attribute("ragline.chunks", len(chunks))
            parts = [
                await asyncio.to_thread(self.embedder.embed_passages, [f"{c.title}\n{c.text}" for c in chunks[i : i + batch]])
                for i in range(0, len(chunks), batch)
            ]
        return np.concatenate(parts) if parts else np.zeros((0, self.embedder.dim), dtype=np.float32)

    async def DeleteDocuments(
        self, request: retrieval_pb2.DeleteDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.DeleteDocumentsResponse:
        await self._check_tenant(request.tenant, context)
        if not request.document_ids:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no document ids given")
        deleted = await self.store.delete_documents(request.tenant, list(request.document_ids))
        return retrieval_pb2.DeleteDocumentsResponse(chunks_deleted=deleted)

    async def DeleteTenant(self, request: retrieval_pb2.DeleteTenantRequest, context: grpc.aio.ServicerContext
                           ) -> retrieval_pb2.DeleteTenantResponse:
        await self._check_tenant(request.tenant, context)
        return retrieval_pb2.DeleteTenantResponse(existed=await self.store.delete_tenant(request.tenant))


async def main() -> None:
    runtime = bootstrap("retrieval")
    settings = load_settings(RetrievalSettings)
    client = weaviate.use_async_with_local(
        host=settings.weaviate_host, port=settings.weaviate_http_port, grpc_port=settings.weaviate_grpc_port
    )
    await client.connect()
    store = ChunkStore(client, settings.collection)
    await store.ensure_schema()
    embedder = await asyncio.to_thread(load_embedder, settings.embedder, settings.embed_cache)

    def register(server: grpc.aio.Server) -> Iterable[str]:
        retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server(Retrieval(settings, store, embedder), server)
        return [retrieval_pb2.DESCRIPTOR.services_by_name["RetrievalService"].full_name]

    await serve("retrieval", settings.port, register, runtime, on_stop=client.close)
