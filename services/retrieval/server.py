"""The Retrieval gRPC service: validates each request and hands it to search, ingestion or the store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

import grpc

from ragline.domain.access import InvalidGroups, check_groups
from ragline.domain.glossary import Glossaries, load_glossaries
from ragline.embedding import Embedder, load_embedder
from ragline.runtime.caches import cache_dir, cache_file
from ragline.runtime.config import load_settings
from ragline.runtime.server import bootstrap, serve
from ragline.v1 import retrieval_pb2, retrieval_pb2_grpc
from services.retrieval.catalog import DocumentRecord
from services.retrieval.config import RetrievalSettings
from services.retrieval.ingest import Ingestor
from services.retrieval.search import InvalidArgument, Searcher, search_args, validate_tenant
from services.retrieval.store import ChunkStore

MAX_PAGE_SIZE = 1000
# Weaviate's QUERY_MAXIMUM_RESULTS: how deep offset paging reaches.
MAX_LISTED = 10_000


def document_info(record: DocumentRecord) -> retrieval_pb2.DocumentInfo:
    return retrieval_pb2.DocumentInfo(
        id=record.id, title=record.title, source=record.source, format=record.format, chunks=record.chunks,
        content_hash=record.content_hash, updated_at=record.updated_at, access_groups=record.access_groups,
        sync_root=record.sync_root, parts=record.parts)


class Retrieval(retrieval_pb2_grpc.RetrievalServiceServicer):
    def __init__(self, settings: RetrievalSettings, store: ChunkStore, embedder: Embedder,
                 glossaries: Glossaries | None = None) -> None:
        self.settings = settings
        self.store = store
        self.searcher = Searcher(store, embedder, glossaries)
        self.ingestor = Ingestor(settings, store, embedder)

    @staticmethod
    async def _check_tenant(tenant: str, context: grpc.aio.ServicerContext, groups: Iterable[str] = ()) -> list[str]:
        """The tenant checked, and the caller's groups (INVALID_ARGUMENT for a bad one)."""
        try:
            validate_tenant(tenant)
            return check_groups(groups)
        except (InvalidArgument, InvalidGroups) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise  # abort raises; this line is for the type checker

    async def close(self) -> None:
        self.ingestor.parsers.close()
        await self.store.close()

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
        groups = await self._check_tenant(request.tenant, context, request.access_groups)
        if not request.document_ids:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no document ids given")
        wanted = sorted(set(request.document_ids))
        # Only what the caller may read is deleted, catalog record and chunks; chunks of a document whose
        # ingestion was interrupted before its record was written go with it when the caller may read them.
        visible = [r.id for r in await self.store.catalog.visible(request.tenant, groups, wanted)]
        deleted = await self.store.delete_documents(request.tenant, visible, groups) if visible else 0
        if visible:
            await self.store.catalog.delete(request.tenant, visible)
        return retrieval_pb2.DeleteDocumentsResponse(chunks_deleted=deleted, deleted=visible,
                                                     not_found=[d for d in wanted if d not in visible])

    async def ListIndexedDocuments(self, request: retrieval_pb2.ListIndexedDocumentsRequest,
                                   context: grpc.aio.ServicerContext) -> retrieval_pb2.ListIndexedDocumentsResponse:
        groups = await self._check_tenant(request.tenant, context, request.access_groups)
        size = request.page_size or 100
        offset = int(request.page_token) if request.page_token.isdigit() else -1
        if request.page_token and offset < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "page_token is not one this service gave")
        if not 1 <= size <= MAX_PAGE_SIZE:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"page_size must be within [1, {MAX_PAGE_SIZE}], got {size}")
        offset = max(offset, 0)
        # Weaviate pages by offset only so deep; what lies beyond is reported, never silently cut.
        reach = min(size, MAX_LISTED - offset)
        records, more = await self.store.catalog.list(request.tenant, groups, request.sync_root, reach, offset) if reach > 0 else ([], True)
        deeper = more and offset + reach < MAX_LISTED
        return retrieval_pb2.ListIndexedDocumentsResponse(
            documents=[document_info(r) for r in records], next_page_token=str(offset + reach) if deeper else "",
            truncated=more and not deeper)

    async def GetIndexedDocument(self, request: retrieval_pb2.GetIndexedDocumentRequest,
                                 context: grpc.aio.ServicerContext) -> retrieval_pb2.GetIndexedDocumentResponse:
        groups = await self._check_tenant(request.tenant, context, request.access_groups)
        found = await self.store.catalog.visible(request.tenant, groups, [request.document_id]) if request.document_id else []
        if not found:
            # The same answer for "absent" and "not yours": a key learns nothing of documents it may not read.
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no document {request.document_id!r}")
        return retrieval_pb2.GetIndexedDocumentResponse(document=document_info(found[0]))

    async def DeleteTenant(self, request: retrieval_pb2.DeleteTenantRequest, context: grpc.aio.ServicerContext
                           ) -> retrieval_pb2.DeleteTenantResponse:
        await self._check_tenant(request.tenant, context)
        return retrieval_pb2.DeleteTenantResponse(existed=await self.store.delete_tenant(request.tenant))


async def build(settings: RetrievalSettings, glossaries: Glossaries | None = None, caches: Path | None = None) -> Retrieval:
    """The servicer over a connected store and a loaded embedder (its vectors cached in `caches`); close it with
    `servicer.close()`."""
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

    await serve("retrieval", settings.port, register, runtime, on_stop=servicer.close, depends_on=servicer.store.ready)
