"""The same stage logic composed in one process, for comparing against the mesh: the orchestrator's
FlowRunner over the servicers themselves instead of their gRPC clients. Each servicer is wired by its
service's own build(), so no wiring and no flow code is copied."""

from __future__ import annotations

from typing import Any

import grpc

from ragline.runtime.caches import cache_dir
from ragline.runtime.config import RuntimeSettings
from ragline.runtime.deadlines import Budget
from ragline.runtime.errors import StatusError
from services.generator.config import GeneratorSettings
from services.generator.server import Generator
from services.generator.server import build as build_generator
from services.grader.config import GraderSettings
from services.grader.server import Grader
from services.grader.server import build as build_grader
from services.reranker.config import RerankerSettings
from services.reranker.server import Reranker
from services.reranker.server import build as build_reranker
from services.retrieval.config import RetrievalSettings
from services.retrieval.server import Retrieval
from services.retrieval.server import build as build_retrieval
from services.router.config import RouterSettings
from services.router.server import Router
from services.router.server import build as build_router


class _LocalContext:
    """What a servicer needs of grpc.aio.ServicerContext when it is called directly."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def time_remaining(self) -> float:
        return self.budget.remaining()

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise StatusError(code, details)


class InProcessStages:
    def __init__(self, router: Router, retrieval: Retrieval, reranker: Reranker, grader: Grader, generator: Generator) -> None:
        self.router, self.retrieval, self.reranker = router, retrieval, reranker
        self.grader, self.generator = grader, generator

    @classmethod
    async def create(cls) -> InProcessStages:
        caches = cache_dir(RuntimeSettings())
        return cls(build_router(RouterSettings()), await build_retrieval(RetrievalSettings(), caches=caches),
                   build_reranker(RerankerSettings()), build_grader(GraderSettings()), build_generator(GeneratorSettings(), caches=caches))

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
        await self.retrieval.close()
