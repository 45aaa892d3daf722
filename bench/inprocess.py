"""The same stage logic composed in one process, for comparing against the mesh: the orchestrator's
FlowRunner over the servicers themselves instead of their gRPC clients. No flow code is copied."""

from __future__ import annotations

from typing import Any

import grpc
import weaviate

from ragline.runtime.deadlines import Budget
from ragline.runtime.errors import StatusError
from services.generator.backends import OfflineGenerator
from services.generator.config import GeneratorSettings
from services.generator.server import Generator
from services.grader.backends import OfflineGrader
from services.grader.config import GraderSettings
from services.grader.server import Grader
from services.reranker.config import RerankerSettings
from services.reranker.logic import load_scorer
from services.reranker.server import Reranker
from services.retrieval.config import RetrievalSettings
from services.retrieval.embedder import load_embedder
from services.retrieval.server import Retrieval
from services.retrieval.store import ChunkStore
from services.router.backends import RouterBackend
from services.router.classifier import MultiHopClassifier
from services.router.config import RouterSettings
from services.router.server import Router


class _LocalContext:
    """What a servicer needs of grpc.aio.ServicerContext when it is called directly."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def time_remaining(self) -> float:
        return self.budget.remaining()

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise StatusError(code, details)


class InProcessStages:
    def __init__(self, router: Router, retrieval: Retrieval, reranker: Reranker, grader: Grader, generator: Generator,
                 client: weaviate.WeaviateAsyncClient) -> None:
        self.router, self.retrieval, self.reranker = router, retrieval, reranker
        self.grader, self.generator, self.client = grader, generator, client

    @classmethod
    async def create(cls) -> InProcessStages:
        rs = RetrievalSettings()
        client = weaviate.use_async_with_local(host=rs.weaviate_host, port=rs.weaviate_http_port, grpc_port=rs.weaviate_grpc_port)
        await client.connect()
        retrieval = Retrieval(rs, ChunkStore(client, rs.collection), load_embedder(rs.embedder, rs.embed_cache))
        ks, rts, gs, ges = RerankerSettings(), RouterSettings(), GraderSettings(), GeneratorSettings()
        router = Router(RouterBackend(MultiHopClassifier(), None, rts.fast_path_confidence, rts.multihop_threshold,
                                      rts.max_sub_questions))
        return cls(router, retrieval, Reranker(ks, load_scorer(ks.model, ks.max_length, ks.batch_size)),
                   Grader(OfflineGrader(gs), None), Generator(OfflineGenerator(ges), None), client)

    @staticmethod
    async def _call(method: Any, req: Any, budget: Budget) -> Any:
        return await method(req, _LocalContext(budget))

    async def route(self, req, budget):  # type: ignore[no-untyped-def]
        return await self._call(self.router.Route, req, budget)

    async def search(self, req, budget):  # type: ignore[no-untyped-def]
        return await self._call(self.retrieval.Search, req, budget)

    async def rerank(self, req, budget):  # type: ignore[no-untyped-def]
        return await self._call(self.reranker.Rerank, req, budget)

    async def grade_documents(self, req, budget):  # type: ignore[no-untyped-def]
        return await self._call(self.grader.GradeDocuments, req, budget)

    async def grade_answer(self, req, budget):  # type: ignore[no-untyped-def]
        return await self._call(self.grader.GradeAnswer, req, budget)

    async def generate(self, req, budget):  # type: ignore[no-untyped-def]
        return await self._call(self.generator.Generate, req, budget)

    async def decompose(self, req, budget):  # type: ignore[no-untyped-def]
        return await self._call(self.generator.Decompose, req, budget)

    async def rewrite(self, req, budget):  # type: ignore[no-untyped-def]
        return await self._call(self.generator.RewriteQuery, req, budget)

    async def close(self) -> None:
        await self.client.close()
