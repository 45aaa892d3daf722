"""The gRPC front end: the RaglineService."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from gateway.backend import Backend, GatewayError
from gateway.config import Caller
from ragline.runtime.deadlines import Budget
from ragline.v1 import ragline_pb2, ragline_pb2_grpc


def peer_address(peer: str) -> str:
    """The client's address as the HTTP side names it: "ipv4:127.0.0.1:53422" -> "127.0.0.1", "ipv6:[::1]:5" -> "::1"."""
    _, _, rest = peer.partition(":")
    return rest.rsplit(":", 1)[0].strip("[]") or peer


class RaglineApi(ragline_pb2_grpc.RaglineServiceServicer):
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    async def _auth(self, context: grpc.aio.ServicerContext, ingest: bool = False) -> tuple[Caller, Budget]:
        metadata = dict(context.invocation_metadata() or ())
        caller = await self.backend.authenticate(metadata.get("authorization"), peer_address(context.peer()))
        remaining = context.time_remaining()
        return caller, self.backend.budget(None if remaining is None else remaining * 1000, ingest=ingest, clamp=True)

    async def Answer(self, request: ragline_pb2.AnswerRequest, context: grpc.aio.ServicerContext) -> ragline_pb2.AnswerResponse:
        try:
            caller, budget = await self._auth(context)
            q = self.backend.question(request.query, request.strategy, request.session_id, list(request.filters))
            return ragline_pb2.AnswerResponse(answer=await self.backend.answer(caller, q, budget))
        except GatewayError as exc:
            await context.abort(exc.code, exc.message)

    async def AnswerStream(
        self, request: ragline_pb2.AnswerStreamRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[ragline_pb2.AnswerStreamResponse]:
        try:
            caller, budget = await self._auth(context)
            q = self.backend.question(request.query, request.strategy, request.session_id, list(request.filters))
            async for event in self.backend.answer_stream(caller, q, budget):
                if event.HasField("final"):
                    yield ragline_pb2.AnswerStreamResponse(final=event.final)
                else:
                    yield ragline_pb2.AnswerStreamResponse(delta=event.delta)
        except GatewayError as exc:
            await context.abort(exc.code, exc.message)

    async def IngestDocuments(
        self, request: ragline_pb2.IngestDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> ragline_pb2.IngestDocumentsResponse:
        try:
            caller, budget = await self._auth(context, ingest=True)
            resp = await self.backend.ingest(caller, list(request.documents), budget)
        except GatewayError as exc:
            await context.abort(exc.code, exc.message)
        return ragline_pb2.IngestDocumentsResponse(results=resp.results, chunks_written=resp.chunks_written,
                                                   documents_failed=resp.documents_failed)

    async def ListDocuments(self, request: ragline_pb2.ListDocumentsRequest, context: grpc.aio.ServicerContext
                            ) -> ragline_pb2.ListDocumentsResponse:
        try:
            caller, budget = await self._auth(context)
            page = await self.backend.list_documents(caller, request.sync_root, request.page_size, request.page_token, budget)
        except GatewayError as exc:
            await context.abort(exc.code, exc.message)
        return ragline_pb2.ListDocumentsResponse(documents=page.documents, next_page_token=page.next_page_token,
                                                 truncated=page.truncated)

    async def GetDocument(self, request: ragline_pb2.GetDocumentRequest, context: grpc.aio.ServicerContext
                          ) -> ragline_pb2.GetDocumentResponse:
        try:
            caller, budget = await self._auth(context)
            return ragline_pb2.GetDocumentResponse(document=await self.backend.get_document(caller, request.document_id, budget))
        except GatewayError as exc:
            await context.abort(exc.code, exc.message)

    async def DeleteDocument(self, request: ragline_pb2.DeleteDocumentRequest, context: grpc.aio.ServicerContext
                             ) -> ragline_pb2.DeleteDocumentResponse:
        try:
            caller, budget = await self._auth(context)
            return ragline_pb2.DeleteDocumentResponse(chunks_deleted=await self.backend.delete_document(caller, request.document_id, budget))
        except GatewayError as exc:
            await context.abort(exc.code, exc.message)
