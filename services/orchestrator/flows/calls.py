"""Every stage call a flow makes, within the request's budget, each with its defined degradation: the reranker
down keeps the fused order, the grader down leaves grades unknown, the generator down quotes the best passage,
the router down routes by the same rules in-process; retrieval down fails the request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from ragline.domain.answers import UNCERTAIN, quote_lead
from ragline.domain.routing import route_by_rules
from ragline.runtime.clients import StageUnavailable
from ragline.runtime.deadlines import Budget
from ragline.v1 import common_pb2, generator_pb2, grader_pb2, reranker_pb2, retrieval_pb2, router_pb2
from services.orchestrator.config import OrchestratorSettings
from services.orchestrator.flows.state import NO, UNKNOWN, YES, FlowError, Run
from services.orchestrator.stages import Stages
from services.orchestrator.websearch import WebSearch

T = TypeVar("T")


def quote_passage(chunk: common_pb2.ScoredChunk) -> generator_pb2.GenerateResponse:
    """The passage's opening sentences as the answer, cited: what the flows say when the generator cannot."""
    answer, citations = quote_lead(chunk, 2)
    return generator_pb2.GenerateResponse(answer=answer, citations=citations)


class StageCalls:
    def __init__(self, stages: Stages, settings: OrchestratorSettings, web: WebSearch | None = None) -> None:
        self.stages = stages
        self.settings = settings
        self.web = web

    async def call(self, run: Run, stage: str, fn: Callable[..., Awaitable[T]], req: Any) -> T:
        """One budgeted stage call, counted and timed; its model usage is added to the answer's."""
        # Checked here, not only in the gRPC client, so the in-process composition stops the same way.
        if run.budget.expired():
            raise StageUnavailable(stage, "skipped: deadline budget exhausted", grpc.StatusCode.DEADLINE_EXCEEDED)
        with run.timed(stage):
            run.answer.stage_calls += 1
            response = await fn(req, run.budget)
        usage = getattr(response, "usage", None)
        for fallback in getattr(usage, "fallbacks", ()):
            run.degrade(f"{stage}: the model failed, its offline backend answered ({fallback})")
        if usage is not None and usage.calls:
            total = run.answer.usage
            total.calls += usage.calls
            total.prompt_tokens += usage.prompt_tokens
            total.completion_tokens += usage.completion_tokens
            total.cost_usd += usage.cost_usd
            run.answer.llm_calls += usage.calls
        return response

    async def route(self, run: Run) -> router_pb2.RouteResponse:
        try:
            return await self.call(run, "route", self.stages.route,
                                   router_pb2.RouteRequest(query=run.query.query, tenant=run.query.tenant))
        except StageUnavailable as exc:
            run.degrade(f"router {exc.reason}: rule-based route")
            rules = route_by_rules(run.query.query)
            return router_pb2.RouteResponse(query_type=rules.query_type, strategy=rules.strategy,
                                            reason=rules.reason, decided_by="rules (orchestrator fallback)")

    async def retrieve(self, run: Run, query: str, top_k: int, rerank: bool = True,
                       rank_for: str | None = None) -> list[common_pb2.ScoredChunk]:
        """Search for `query`; rerank against `rank_for` (default: the same query), so that a rewritten search
        is still ranked, and its probabilities graded, against what the user asked."""
        candidates = await self._search(run, query)
        if not candidates and run.inferred_filters:
            # The router read these filters from the question's wording; the caller did not ask for them.
            wanted = "; ".join(f"{f.field} in {list(f.values)}" for f in run.query.filters)
            run.degrade(f"nothing matched the filters read from the question ({wanted}): searched without them")
            del run.query.filters[:]
            run.inferred_filters = False
            candidates = await self._search(run, query)
        if not rerank or not candidates or not self.settings.tenant_rerank.get(run.query.tenant, True):
            return candidates[:top_k]
        try:
            ranked = await self.call(run, "rerank", self.stages.rerank,
                                     reranker_pb2.RerankRequest(query=rank_for or query, candidates=candidates, top_k=top_k))
            return list(ranked.results)
        except StageUnavailable as exc:
            run.degrade(f"reranker {exc.reason}: kept the fused hybrid order")
            return candidates[:top_k]

    async def _search(self, run: Run, query: str) -> list[common_pb2.ScoredChunk]:
        # Every search of every flow (hops, rewrites) carries the caller's groups: retrieval filters by them in Weaviate.
        req = retrieval_pb2.SearchRequest(tenant=run.query.tenant, query=query, limit=self.settings.candidates,
                                          filters=run.query.filters, access_groups=run.query.access_groups)
        try:
            found = await self.call(run, "retrieve", self.stages.search, req)
        except StageUnavailable as exc:
            raise FlowError(exc.code, f"retrieval unavailable: {exc.reason}") from exc
        for t in found.timings:
            run.timings[f"retrieve.{t.stage}"] = run.timings.get(f"retrieve.{t.stage}", 0.0) + t.millis
        return list(found.results)

    async def grade_documents(self, run: Run, query: str,
                              chunks: list[common_pb2.ScoredChunk]) -> tuple[list[common_pb2.ScoredChunk], int]:
        """The chunks graded relevant and the overall grade (UNKNOWN, with every chunk kept, if the grader is down)."""
        if not chunks:
            return [], NO
        try:
            graded = await self.call(run, "grade", self.stages.grade_documents,
                                     grader_pb2.GradeDocumentsRequest(query=query, candidates=chunks))
        except StageUnavailable as exc:
            run.degrade(f"grader {exc.reason}: documents not graded")
            return chunks, UNKNOWN
        relevant_ids = {g.chunk_id for g in graded.grades if g.relevant == YES}
        kept = [c for c in chunks if c.chunk.id in relevant_ids]
        return kept, (YES if kept else NO)

    async def grade_answer(self, run: Run, query: str, answer: str,
                           chunks: list[common_pb2.ScoredChunk]) -> grader_pb2.GradeAnswerResponse | None:
        try:
            return await self.call(run, "grade", self.stages.grade_answer,
                                   grader_pb2.GradeAnswerRequest(query=query, answer=answer, context=chunks))
        except StageUnavailable as exc:
            run.degrade(f"grader {exc.reason}: answer not checked")
            return None

    async def generate(self, run: Run, inp: generator_pb2.GenerationInput, final: bool = False) -> generator_pb2.GenerateResponse:
        """The generator's answer. final: this generation is the flow's answer, so a streaming request gets its
        tokens as the model produces them."""
        streaming = final and run.deltas is not None and hasattr(self.stages, "generate_stream")
        try:
            if streaming:
                gen = await self.call(run, "generate", lambda req, budget: self._streamed(run, req, budget),
                                      generator_pb2.GenerateStreamRequest(input=inp))
                if gen.first_token_ms:
                    run.timings["generate.first_token"] = gen.first_token_ms
            else:
                gen = await self.call(run, "generate", self.stages.generate, generator_pb2.GenerateRequest(input=inp))
        except StageUnavailable as exc:
            if not inp.context:
                raise FlowError(exc.code, f"generator unavailable: {exc.reason}") from exc
            run.degrade(f"generator {exc.reason}: quoted the best passage instead")
            return quote_passage(inp.context[0])
        if gen.uncited and inp.context:
            # An answer that cites nothing cannot be traced to a passage: have it checked, and say so.
            verdict = await self.grade_answer(run, inp.query, gen.answer, list(inp.context))
            if verdict is None:
                outcome = "not checked"
            elif verdict.supported == NO:
                outcome = "not supported"
                # The flow sets its answer from this response: the uncertainty note goes with the text.
                gen.answer = f"{gen.answer} {UNCERTAIN[run.lang]}"
                run.answer.uncertain = True
            else:
                outcome = "supported"
            run.degrade(f"generator: the model's answer cites no passage; support checked: {outcome}")
        return gen

    async def _streamed(self, run: Run, req: generator_pb2.GenerateStreamRequest, budget: Budget) -> generator_pb2.GenerateResponse:
        assert run.deltas is not None
        final = None
        try:
            async for event in self.stages.generate_stream(req, budget):  # type: ignore[attr-defined]
                if event.HasField("final"):
                    final = event.final
                else:
                    run.deltas.put_nowait(event.delta)
        except grpc.aio.AioRpcError as exc:
            raise StageUnavailable("generator", f"failed: {exc.code().name}", exc.code()) from exc
        if final is None:
            raise StageUnavailable("generator", "failed: the stream ended without an answer")
        return final

    async def decompose(self, run: Run, query: str, max_hops: int) -> tuple[list[common_pb2.SubQuestion], str]:
        """The generator's decomposition; with the generator down, none ("single": iterative retrieval only)."""
        try:
            dec = await self.call(run, "decompose", self.stages.decompose,
                                  generator_pb2.DecomposeRequest(query=query, max_hops=max_hops))
            return list(dec.sub_questions), dec.kind
        except StageUnavailable as exc:
            run.degrade(f"generator {exc.reason}: no decomposition, iterative retrieval only")
            return [], "single"

    async def rewrite(self, run: Run, query: str, feedback: list[common_pb2.ScoredChunk]) -> str | None:
        """A rewritten query, or None when the generator cannot rewrite."""
        try:
            rw = await self.call(run, "rewrite", self.stages.rewrite, generator_pb2.RewriteQueryRequest(
                query=query, previous_rewrites=run.answer.rewrites, feedback=feedback))
        except StageUnavailable as exc:
            run.degrade(f"generator {exc.reason}: query not rewritten")
            return None
        return rw.query

    async def web_search(self, run: Run, query: str) -> list[common_pb2.ScoredChunk]:
        """The web's results for a question the knowledge base has nothing relevant for (none without web search)."""
        if self.web is None:
            return []
        try:
            found = await self.call(run, "websearch", self.web.search, query)
        except StageUnavailable as exc:
            run.degrade(f"websearch {exc.reason}")
            return []
        run.degrade("knowledge base had nothing relevant: answered from web search")
        return found
