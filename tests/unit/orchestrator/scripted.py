"""Scripted stages for the flow tests: each test sets what the stages answer; every call is recorded.
The mesh tests run the same flows over the real services."""

from __future__ import annotations

import asyncio

from ragline.runtime.clients import StageUnavailable
from ragline.runtime.deadlines import Budget
from ragline.v1 import common_pb2, generator_pb2, grader_pb2, orchestrator_pb2, reranker_pb2, retrieval_pb2, router_pb2
from services.orchestrator.config import OrchestratorSettings
from services.orchestrator.flows import FlowRunner

YES, NO = common_pb2.GRADE_YES, common_pb2.GRADE_NO


def chunk(cid: str, text: str, title: str = "") -> common_pb2.ScoredChunk:
    return common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=cid, document_id=cid, title=title or cid, text=text), score=1.0)


def sub_question(sub: str | tuple[str, list[int]]) -> common_pb2.SubQuestion:
    text, depends_on = (sub, []) if isinstance(sub, str) else sub
    return common_pb2.SubQuestion(text=text, depends_on=depends_on)


class Scripted:
    """Stages whose answers each test sets; records every call."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.route_to = common_pb2.STRATEGY_STANDARD
        self.results: list[common_pb2.ScoredChunk] = [chunk("a", "HikariCP default pool size is 10.")]
        self.search_by_query: dict[str, list[common_pb2.ScoredChunk]] = {}
        self.relevant: set[str] | None = None  # None: everything relevant
        self.supported = [YES]
        self.useful = YES
        self.down: set[str] = set()
        self.decomposition: tuple[list[str | tuple[str, list[int]]], str] = ([], "single")
        self.rewrites = iter(f"rewrite {i}" for i in range(100))
        self.search_delay = 0.0
        self.route_decomposition: tuple[list[str], str] | None = None
        self.searched: list[str] = []
        self.route_filters: list[common_pb2.MetadataFilter] = []
        self.filtered_results: list[common_pb2.ScoredChunk] | None = None  # None: filters change nothing
        self.searched_with: list[list[common_pb2.MetadataFilter]] = []
        self.ranked_for: list[str] = []
        self.generated: list[generator_pb2.GenerationInput] = []
        self.searching = 0
        self.most_searching_at_once = 0

    def _enter(self, name: str, stage: str) -> None:
        self.calls.append(name)
        if stage in self.down:
            raise StageUnavailable(stage, "skipped: circuit open")

    async def route(self, req: router_pb2.RouteRequest, budget: Budget) -> router_pb2.RouteResponse:
        self._enter("route", "router")
        resp = router_pb2.RouteResponse(strategy=self.route_to, query_type=common_pb2.QUERY_TYPE_COMPLEX_REASONING, reason="scripted",
                                        intent="troubleshoot", filters=self.route_filters)
        if self.route_decomposition:
            subs, resp.decomposition = self.route_decomposition
            resp.sub_questions.extend(common_pb2.SubQuestion(text=t) for t in subs)
        return resp

    async def search(self, req: retrieval_pb2.SearchRequest, budget: Budget) -> retrieval_pb2.SearchResponse:
        self._enter("search", "retrieval")
        self.searched.append(req.query)
        self.searched_with.append(list(req.filters))
        self.searching += 1
        self.most_searching_at_once = max(self.most_searching_at_once, self.searching)
        try:
            await asyncio.sleep(self.search_delay)
        finally:
            self.searching -= 1
        if req.filters and self.filtered_results is not None:
            return retrieval_pb2.SearchResponse(results=self.filtered_results)
        return retrieval_pb2.SearchResponse(results=self.search_by_query.get(req.query, self.results))

    async def rerank(self, req: reranker_pb2.RerankRequest, budget: Budget) -> reranker_pb2.RerankResponse:
        self._enter("rerank", "reranker")
        self.ranked_for.append(req.query)
        return reranker_pb2.RerankResponse(results=list(req.candidates)[: req.top_k])

    async def grade_documents(self, req: grader_pb2.GradeDocumentsRequest, budget: Budget) -> grader_pb2.GradeDocumentsResponse:
        self._enter("grade_documents", "grader")
        return grader_pb2.GradeDocumentsResponse(grades=[
            grader_pb2.DocumentGrade(chunk_id=c.chunk.id, relevant=YES if self.relevant is None or c.chunk.id in self.relevant else NO)
            for c in req.candidates])

    async def grade_answer(self, req: grader_pb2.GradeAnswerRequest, budget: Budget) -> grader_pb2.GradeAnswerResponse:
        self._enter("grade_answer", "grader")
        supported = self.supported.pop(0) if len(self.supported) > 1 else self.supported[0]
        return grader_pb2.GradeAnswerResponse(supported=supported, useful=self.useful)

    async def generate(self, req: generator_pb2.GenerateRequest, budget: Budget) -> generator_pb2.GenerateResponse:
        self._enter(f"generate:{generator_pb2.GenerationMode.Name(req.input.mode)}", "generator")
        self.generated.append(req.input)
        if not req.input.context:
            return generator_pb2.GenerateResponse(answer="hello")
        c = req.input.context[0].chunk
        return generator_pb2.GenerateResponse(answer=f"{c.text} [1]", citations=[common_pb2.Citation(index=1, chunk_id=c.id)])

    async def decompose(self, req: generator_pb2.DecomposeRequest, budget: Budget) -> generator_pb2.DecomposeResponse:
        self._enter("decompose", "generator")
        subs, kind = self.decomposition
        return generator_pb2.DecomposeResponse(sub_questions=[sub_question(s) for s in (subs or [req.query])], kind=kind)

    async def rewrite(self, req: generator_pb2.RewriteQueryRequest, budget: Budget) -> generator_pb2.RewriteQueryResponse:
        self._enter("rewrite", "generator")
        return generator_pb2.RewriteQueryResponse(query=next(self.rewrites))


SETTINGS = OrchestratorSettings(max_hops=3, max_retries=3)


async def run(stages: Scripted, query: str, strategy: int, seconds: float = 5.0) -> common_pb2.Answer:
    runner = FlowRunner(stages, SETTINGS)
    return await runner.run(orchestrator_pb2.FlowQuery(tenant="t", query=query, strategy=strategy), Budget(seconds, 0.01))
