"""The stages a flow calls, behind one interface, so the same flows run over the mesh or in one process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from ragline.runtime.clients import StageClient
from ragline.runtime.config import RuntimeSettings
from ragline.runtime.deadlines import Budget
from ragline.v1 import (
    generator_pb2,
    generator_pb2_grpc,
    grader_pb2,
    grader_pb2_grpc,
    reranker_pb2,
    reranker_pb2_grpc,
    retrieval_pb2,
    retrieval_pb2_grpc,
    router_pb2,
    router_pb2_grpc,
)


class Stages(Protocol):
    """Each method raises ragline.runtime.clients.StageUnavailable when its stage cannot answer."""

    async def route(self, req: router_pb2.RouteRequest, budget: Budget) -> router_pb2.RouteResponse: ...
    async def search(self, req: retrieval_pb2.SearchRequest, budget: Budget) -> retrieval_pb2.SearchResponse: ...
    async def rerank(self, req: reranker_pb2.RerankRequest, budget: Budget) -> reranker_pb2.RerankResponse: ...
    async def grade_documents(self, req: grader_pb2.GradeDocumentsRequest, budget: Budget) -> grader_pb2.GradeDocumentsResponse: ...
    async def grade_answer(self, req: grader_pb2.GradeAnswerRequest, budget: Budget) -> grader_pb2.GradeAnswerResponse: ...
    async def generate(self, req: generator_pb2.GenerateRequest, budget: Budget) -> generator_pb2.GenerateResponse: ...
    # Optional: stages without it answer a stream with generate's whole answer.
    # def generate_stream(self, req, budget) -> AsyncIterator[generator_pb2.GenerateStreamResponse]
    async def decompose(self, req: generator_pb2.DecomposeRequest, budget: Budget) -> generator_pb2.DecomposeResponse: ...
    async def rewrite(self, req: generator_pb2.RewriteQueryRequest, budget: Budget) -> generator_pb2.RewriteQueryResponse: ...


class MeshStages:
    """Stages reached over gRPC, each behind its own circuit breaker."""

    def __init__(self, settings: RuntimeSettings) -> None:
        self.router = StageClient("router", router_pb2_grpc.RouterServiceStub, settings)
        self.retrieval = StageClient("retrieval", retrieval_pb2_grpc.RetrievalServiceStub, settings)
        self.reranker = StageClient("reranker", reranker_pb2_grpc.RerankerServiceStub, settings)
        self.grader = StageClient("grader", grader_pb2_grpc.GraderServiceStub, settings)
        self.generator = StageClient("generator", generator_pb2_grpc.GeneratorServiceStub, settings)

    async def route(self, req: router_pb2.RouteRequest, budget: Budget) -> router_pb2.RouteResponse:
        return await self.router.call("Route", req, budget)

    async def search(self, req: retrieval_pb2.SearchRequest, budget: Budget) -> retrieval_pb2.SearchResponse:
        return await self.retrieval.call("Search", req, budget)

    async def rerank(self, req: reranker_pb2.RerankRequest, budget: Budget) -> reranker_pb2.RerankResponse:
        return await self.reranker.call("Rerank", req, budget)

    async def grade_documents(self, req: grader_pb2.GradeDocumentsRequest, budget: Budget) -> grader_pb2.GradeDocumentsResponse:
        return await self.grader.call("GradeDocuments", req, budget)

    async def grade_answer(self, req: grader_pb2.GradeAnswerRequest, budget: Budget) -> grader_pb2.GradeAnswerResponse:
        return await self.grader.call("GradeAnswer", req, budget)

    async def generate(self, req: generator_pb2.GenerateRequest, budget: Budget) -> generator_pb2.GenerateResponse:
        return await self.generator.call("Generate", req, budget)

    def generate_stream(self, req: generator_pb2.GenerateStreamRequest, budget: Budget) -> AsyncIterator[generator_pb2.GenerateStreamResponse]:
        return self.generator.stream("GenerateStream", req, budget)

    async def decompose(self, req: generator_pb2.DecomposeRequest, budget: Budget) -> generator_pb2.DecomposeResponse:
        return await self.generator.call("Decompose", req, budget)

    async def rewrite(self, req: generator_pb2.RewriteQueryRequest, budget: Budget) -> generator_pb2.RewriteQueryResponse:
        return await self.generator.call("RewriteQuery", req, budget)

    async def close(self) -> None:
        for client in (self.router, self.retrieval, self.reranker, self.grader, self.generator):
            await client.close()
