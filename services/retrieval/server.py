"""The Retrieval gRPC service: validates each request and hands it to search, ingestion or the store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

import grpc

from ragline.domain.glossary import Glossaries, load_glossaries
from ragline.embedding import Embedder, load_embedder
from ragline.runtime.caches import cache_dir, cache_file
from ragline.runtime.config import load_settings
from ragline.runtime.server import bootstrap, serve
from ragline.v1 import retrieval_pb2, retrieval_pb2_grpc
from services.retrieval.config import RetrievalSettings
from services.retrieval.ingest import Ingestor
from services.retrieval.search import InvalidArgument, Searcher, search_args, validate_tenant
from services.retrieval.store import ChunkStore


class Retrieval(retrieval_pb2_grpc.RetrievalServiceServicer):
    def __init__(self, settings: RetrievalSettings, store: ChunkStore, embedder: Embedder,
                 glossaries: Glossaries | None = None) -> None:
        self.settings = settings
        self.store = store
        self.searcher = Searcher(store, embedder, glossaries)
        self.ingestor = Ingestor(settings, store, embedder)

    @staticmethod
    async def _check_tenant(tenant: str, context: grpc.aio.ServicerContext) -> None:
        try:
            validate_tenant(tenant)
        except InvalidArgument as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

    async def Search(self, request: retrieval_pb2.SearchRequest, context: grpc.aio.ServicerContext) -> retrieval_pb2.SearchResponse:
        try:
            args = search_args(request, self.settings)
        except InvalidArgument as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return await self.searcher.search(request, args)

    async def Ingest(self, request: retrieval_pb2.IngestRequest, context: grpc.aio.ServicerContext) -> retrieval_pb2.IngestResponse:
        await self._check_tenant(request.tenant, context)
        if not request.documents:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no documents to ingest")
        return await self.ingestor.ingest(request.tenant, list(request.documents))

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


async def build(settings: RetrievalSettings, glossaries: Glossaries | None = None, caches: Path | None = None) -> Retrieval:
    """The servicer over a connected store and a loaded embedder (its vectors cached in `caches`); close it with
    `servicer.store.close()`."""
    store = await ChunkStore.open(settings)
    endpoint = {"base_url": settings.embed_base_url, "api_key": settings.embed_api_key, "batch": settings.embed_batch,
                "concurrency": settings.embed_concurrency, "roles": settings.embed_roles}
    embedder = await asyncio.to_thread(load_embedder, settings.embedder, cache_file(settings.embed_cache, caches), endpoint)
    return Retrieval(settings, store, embedder, glossaries)


async def main() -> None:
    runtime = bootstrap("retrieval")
    settings = load_settings(RetrievalSettings)
    servicer = await build(settings, load_glossaries(runtime.glossaries), cache_dir(runtime))

    def register(server: grpc.aio.Server) -> Iterable[str]:
        retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server(servicer, server)
        return [retrieval_pb2.DESCRIPTOR.services_by_name["RetrievalService"].full_name]

    await serve("retrieval", settings.port, register, runtime, on_stop=servicer.store.close)
