"""The flows, each written once against the Stages interface: standard, multi-hop, self-RAG,
combined, light, direct and adaptive. Every loop is bounded and every stage call is budgeted."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from opentelemetry import trace

from ragline.runtime.clients import StageUnavailable
from ragline.runtime.deadlines import Budget
from ragline.runtime.errors import StatusError
from ragline.text import detect_language, question_tokens, tokens
from ragline.v1 import (
    common_pb2,
    generator_pb2,
    grader_pb2,
    orchestrator_pb2,
    reranker_pb2,
    retrieval_pb2,
    router_pb2,
)
from services.generator.logic import quote_lead
from services.grader.logic import coverage
from services.orchestrator.bridging import bridge_entities, evidence_sentence
from services.orchestrator.config import OrchestratorSettings
from services.orchestrator.stages import Stages
from services.orchestrator.websearch import WebSearch
from services.router.logic import route_by_rules

tracer = trace.get_tracer("ragline.orchestrator")
T = TypeVar("T")

NOT_FOUND = {"zh": "文档中没有相关信息。", "en": "The documents do not contain information that answers this question."}
UNCERTAIN = {
    "zh": "（注意：该回答未能被检索到的文档完全支持，请核实。）",
    "en": "(Note: this answer is not fully supported by the retrieved documents; please verify it.)",
}
YES, NO, UNKNOWN = common_pb2.GRADE_YES, common_pb2.GRADE_NO, common_pb2.GRADE_UNSPECIFIED


class FlowError(StatusError):
    """A flow could not produce any answer."""


@dataclass
class Run:
    """The state of one request: its budget, what has been found and what was decided."""

    query: orchestrator_pb2.FlowQuery
    budget: Budget
    answer: common_pb2.Answer = field(default_factory=common_pb2.Answer)
    timings: dict[str, float] = field(default_factory=dict)
    seen: dict[str, common_pb2.ScoredChunk] = field(default_factory=dict)
    # Chunks a grader judged relevant: what a graded flow may answer from (everything seen still counts as retrieved).
    relevant: set[str] = field(default_factory=set)
    # The filters came from the router's reading of the question, not from the caller: they may be dropped.
    inferred_filters: bool = False
    # (sub-questions, kind) when the router already decomposed the question; None: ask the generator.
    decomposition: tuple[list[common_pb2.SubQuestion], str] | None = None

    @property
    def lang(self) -> str:
        return detect_language(self.query.query)

    def degrade(self, what: str) -> None:
        if what not in self.answer.degradations:
            self.answer.degradations.append(what)
            trace.get_current_span().add_event("ragline.degradation", {"what": what})

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[stage] = self.timings.get(stage, 0.0) + (time.perf_counter() - t0) * 1000

    def best_first(self) -> list[common_pb2.ScoredChunk]:
        """Everything retrieved so far, best score first."""
        return sorted(self.seen.values(), key=lambda c: c.score, reverse=True)

    def remember(self, chunks: list[common_pb2.ScoredChunk]) -> None:
        for c in chunks:
            best = self.seen.get(c.chunk.id)
            if best is None or c.score > best.score:
                self.seen[c.chunk.id] = c


def _normalize(question: str) -> str:
    return re.sub(r"\W+", " ", question.lower()).strip()


_PLACEHOLDER = re.compile(r"#(\d+)")
_CITATION = re.compile(r"\s*\[\d+\]")


def _with_answers(question: str, answers: dict[int, str]) -> str:
    """The sub-question with each `#N` replaced by the answer to sub-question N, citation markers removed."""
    def answer(m: re.Match[str]) -> str:
        n = int(m.group(1))
        return _CITATION.sub("", answers[n]).strip() if n in answers else m.group(0)

    return _PLACEHOLDER.sub(answer, question)


def question_coverage(question: str, chunks: list[common_pb2.ScoredChunk]) -> float:
    """Share of the question's content words that the passages (with their titles) contain between them."""
    wanted = question_tokens(question)
    if not wanted:
        return 1.0
    return coverage(wanted, [t for c in chunks for t in tokens(f"{c.chunk.title} {c.chunk.text}")])


class FlowRunner:
    def __init__(self, stages: Stages, settings: OrchestratorSettings, web: WebSearch | None = None) -> None:
        self.stages = stages
        self.s = settings
        self.web = web

    # --- stage calls, each with its defined degradation -------------------------------------

    async def _call(self, run: Run, stage: str, fn: Callable[..., Awaitable[T]], req: Any) -> T:
        # Checked here, not only in the gRPC client, so the in-process composition stops the same way.
        if run.budget.expired():
            raise StageUnavailable(stage, "skipped: deadline budget exhausted", grpc.StatusCode.DEADLINE_EXCEEDED)
        with run.timed(stage):
            run.answer.stage_calls += 1
            response = await fn(req, run.budget)
        usage = getattr(response, "usage", None)
        if usage is not None and usage.calls:
            total = run.answer.usage
            total.calls += usage.calls
            total.prompt_tokens += usage.prompt_tokens
            total.completion_tokens += usage.completion_tokens
            total.cost_usd += usage.cost_usd
            run.answer.llm_calls += usage.calls
        return response

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
        if not rerank or not candidates:
            return candidates[:top_k]
        try:
            ranked = await self._call(run, "rerank", self.stages.rerank,
                                      reranker_pb2.RerankRequest(query=rank_for or query, candidates=candidates,
                                                                 top_k=top_k))
            return list(ranked.results)
        except StageUnavailable as exc:
            run.degrade(f"reranker {exc.reason}: kept the fused hybrid order")
            return candidates[:top_k]

    async def _search(self, run: Run, query: str) -> list[common_pb2.ScoredChunk]:
        req = retrieval_pb2.SearchRequest(tenant=run.query.tenant, query=query, limit=self.s.candidates,
                                          filters=run.query.filters)
        try:
            found = await self._call(run, "retrieve", self.stages.search, req)
        except StageUnavailable as exc:
            raise FlowError(exc.code, f"retrieval unavailable: {exc.reason}") from exc
        for t in found.timings:
            run.timings[f"retrieve.{t.stage}"] = run.timings.get(f"retrieve.{t.stage}", 0.0) + t.millis
        return list(found.results)

    async def grade_documents(self, run: Run, query: str, chunks: list[common_pb2.ScoredChunk]) -> tuple[list[common_pb2.ScoredChunk], int]:
        if not chunks:
            return [], NO
        try:
            graded = await self._call(run, "grade", self.stages.grade_documents,
                                      grader_pb2.GradeDocumentsRequest(query=query, candidates=chunks))
        except StageUnavailable as exc:
            run.degrade(f"grader {exc.reason}: documents not graded")
            return chunks, UNKNOWN
        relevant_ids = {g.chunk_id for g in graded.grades if g.relevant == YES}
        kept = [c for c in chunks if c.chunk.id in relevant_ids]
        return kept, (YES if kept else NO)

    async def grade_answer(self, run: Run, query: str, answer: str, chunks: list[common_pb2.ScoredChunk]) -> grader_pb2.GradeAnswerResponse | None:
        try:
            return await self._call(run, "grade", self.stages.grade_answer,
                                    grader_pb2.GradeAnswerRequest(query=query, answer=answer, context=chunks))
        except StageUnavailable as exc:
            run.degrade(f"grader {exc.reason}: answer not checked")
            return None

    async def generate(self, run: Run, inp: generator_pb2.GenerationInput) -> generator_pb2.GenerateResponse:
        try:
            return await self._call(run, "generate", self.stages.generate, generator_pb2.GenerateRequest(input=inp))
        except StageUnavailable as exc:
            if not inp.context:
                raise FlowError(exc.code, f"generator unavailable: {exc.reason}") from exc
            run.degrade(f"generator {exc.reason}: quoted the best passage instead")
            return quote_best_passage(inp.context[0])

    # --- flows ------------------------------------------------------------------------------

    async def standard(self, run: Run) -> None:
        chunks = await self.retrieve(run, run.query.query, self.s.top_k)
        await self._answer_from(run, chunks)

    async def light(self, run: Run) -> None:
        chunks = await self.retrieve(run, run.query.query, self.s.light_top_k, rerank=False)
        await self._answer_from(run, chunks)

    async def direct(self, run: Run) -> None:
        gen = await self.generate(run, generator_pb2.GenerationInput(query=run.query.query,
                                                                      mode=generator_pb2.GENERATION_MODE_DIRECT))
        run.answer.text = gen.answer

    async def _answer_from(self, run: Run, chunks: list[common_pb2.ScoredChunk]) -> generator_pb2.GenerateResponse:
        run.remember(chunks)
        if not chunks:
            run.answer.text, run.answer.not_found = NOT_FOUND[run.lang], True
            return generator_pb2.GenerateResponse(answer=run.answer.text, not_found=True)
        gen = await self.generate(run, generator_pb2.GenerationInput(query=run.query.query, context=chunks))
        self._set_answer(run, gen)
        return gen

    @staticmethod
    def _set_answer(run: Run, gen: generator_pb2.GenerateResponse) -> None:
        run.answer.text = gen.answer
        del run.answer.citations[:]
        run.answer.citations.extend(gen.citations)
        run.answer.not_found = gen.not_found

    async def multihop(self, run: Run, graded: bool = False, first: common_pb2.Hop | None = None,
                       max_hops: int | None = None) -> None:
        """Decompose; sub-questions in dependency order (independent ones at once), or, for a question that
        does not split, iterative bridge hops; then one synthesis over everything found. `first` is a retrieval
        for the whole question already made."""
        query = run.query.query
        max_hops = max_hops or self.s.max_hops
        if run.decomposition is not None:
            subs, kind = run.decomposition
        else:
            try:
                dec = await self._call(run, "decompose", self.stages.decompose,
                                       generator_pb2.DecomposeRequest(query=query, max_hops=max_hops))
                subs, kind = list(dec.sub_questions), dec.kind
            except StageUnavailable as exc:
                run.degrade(f"generator {exc.reason}: no decomposition, iterative retrieval only")
                subs, kind = [], "single"
        if kind != "single" and len(subs) > 1:
            await self._planned_hops(run, subs[:max_hops], graded)
        else:
            await self._bridge_hops(run, query, graded, max_hops, first)
        pool = run.best_first()
        if graded and run.answer.grades.relevant != UNKNOWN:
            pool = [c for c in pool if c.chunk.id in run.relevant]
        context = pool[: self.s.top_k + len(run.answer.hops)]
        if not context:
            run.answer.text, run.answer.not_found = NOT_FOUND[run.lang], True
            return
        gen = await self.generate(run, generator_pb2.GenerationInput(
            query=query, context=context, reasoning=run.answer.hops, mode=generator_pb2.GENERATION_MODE_SYNTHESIS))
        self._set_answer(run, gen)
        if graded:
            await self._check_support(run, context, gen)

    async def _planned_hops(self, run: Run, subs: list[common_pb2.SubQuestion], graded: bool) -> None:
        """A decomposition's sub-questions in dependency order. Those whose dependencies are answered run in
        parallel; a dependent one has each `#N` in its text replaced by sub-question N's answer, and gets those
        hops as its reasoning. One that repeats an earlier one shares its hop; one whose dependency found
        nothing is skipped, and stays in the hops unanswered so that the synthesis says what is missing."""
        done: dict[int, common_pb2.Hop] = {}
        repeats: dict[int, int] = {}
        asked: dict[str, int] = {}
        # A sub-question can only depend on earlier ones, so every round has something ready and the loop ends.
        needs = {i: [d for d in sub.depends_on if 0 <= d < i] for i, sub in enumerate(subs)}
        while len(done) < len(subs):
            ready = [i for i in range(len(subs)) if i not in done and all(d in done for d in needs[i])]
            if run.budget.expired():
                run.degrade(f"deadline: stopped before sub-question {ready[0]}")
                break
            wave: list[tuple[int, str, list[common_pb2.Hop]]] = []
            for i in ready:
                deps = [done[d] for d in needs[i]]
                question = _with_answers(subs[i].text, {d: done[d].intermediate_answer for d in needs[i]})
                if any(not h.intermediate_answer for h in deps):
                    run.degrade(f"multihop: skipped {subs[i].text!r}: a sub-question it depends on was not answered")
                    done[i] = common_pb2.Hop(index=i, sub_question=subs[i].text)
                elif _normalize(question) in asked:
                    run.degrade(f"multihop: skipped repeated sub-question {question!r}")
                    repeats[i] = asked[_normalize(question)]
                else:
                    asked[_normalize(question)] = i
                    wave.append((i, question, deps))
            hops = await asyncio.gather(*(self._hop(run, i, q, graded, reasoning=deps) for i, q, deps in wave))
            done.update((hop.index, hop) for hop in hops)
            done.update((i, done[j]) for i, j in repeats.items())
        run.answer.hops.extend(done[i] for i in sorted(done) if i not in repeats)

    async def _hop(self, run: Run, index: int, question: str, graded: bool, generate: bool = True,
                   rerank: bool = True, reasoning: list[common_pb2.Hop] | None = None) -> common_pb2.Hop:
        with tracer.start_as_current_span("orchestrator.hop") as span:
            span.set_attributes({"ragline.hop": index, "ragline.sub_question": question})
            retrieved = await self.retrieve(run, question, self.s.top_k, rerank=rerank)
            run.remember(retrieved)
            usable = retrieved
            if graded:
                # Grading filters what the answer may use; every retrieved passage still feeds the next hop.
                usable, grade = await self.grade_documents(run, question, retrieved)
                run.relevant.update(c.chunk.id for c in usable)
                if grade == YES or run.answer.grades.relevant == UNKNOWN:
                    run.answer.grades.relevant = grade
            answer = ""
            if generate and usable and not run.budget.expired():
                gen = await self.generate(run, generator_pb2.GenerationInput(query=question, context=usable,
                                                                              reasoning=reasoning or []))
                answer = "" if gen.not_found else gen.answer
            span.set_attributes({"ragline.chunks": len(retrieved), "ragline.usable_chunks": len(usable)})
            return common_pb2.Hop(index=index, sub_question=question, intermediate_answer=answer,
                                  chunk_ids=[c.chunk.id for c in retrieved])

    async def _bridge_hops(self, run: Run, query: str, graded: bool, max_hops: int,
                           first: common_pb2.Hop | None = None) -> None:
        """Iterative retrieval: each next hop looks up what the previous hop's best new passage names that
        the question does not (the bridge entity). The entity's sentence is that hop's intermediate answer,
        passed on in the next hop's query; no generator call is needed until the final synthesis.
        In the adaptive flow (`first` given) the hops also stop once what they found covers the question."""
        question = query
        asked: set[str] = set()
        for index in range(max_hops):
            if _normalize(question) in asked:
                run.degrade(f"multihop: cycle detected at hop {index}, stopped")
                break
            if run.budget.expired():
                run.degrade(f"deadline: stopped before hop {index}")
                break
            asked.add(_normalize(question))
            before = set() if index == 0 and first is not None else set(run.seen)
            hop = first if index == 0 and first is not None else await self._hop(
                run, index, question, graded, generate=False, rerank=index == 0 or self.s.rerank_bridge_hops)
            new = [run.seen[cid] for cid in hop.chunk_ids if cid not in before]
            entities = [e for c in new[:2] for e in bridge_entities(question, c.chunk.text)]
            entities = [e for e in dict.fromkeys(entities) if e.lower() not in question.lower()][:2]
            if entities:
                source = next(c for c in new if entities[0] in c.chunk.text)
                hop.intermediate_answer = evidence_sentence(source.chunk.text, entities[0])
            run.answer.hops.append(hop)
            if not entities:
                break
            if first is not None and index > 0 and self._hops_cover(run, query):
                run.answer.route_reason += f"; the {index + 1} hops found cover the question, stopped"
                break
            if index + 1 == max_hops:
                trace.get_current_span().set_attribute("ragline.hop_bound_reached", True)
                break
            question = f"{query} {' '.join(entities)}"

    def _hops_cover(self, run: Run, query: str) -> bool:
        """Whether each hop's best passages, taken together, cover the question's content words."""
        best = [run.seen[cid] for hop in run.answer.hops for cid in hop.chunk_ids[: self.s.escalation_passages]]
        return question_coverage(query, best) >= self.s.escalation_coverage

    async def escalating_multihop(self, run: Run) -> None:
        """The adaptive flow's multi-hop: retrieve for the whole question first, and take more hops only when
        the best passages do not cover what the question asks; otherwise answer at standard cost."""
        query = run.query.query
        first = await self._hop(run, 0, query, graded=False, generate=False)
        coverage = question_coverage(query, [run.seen[cid] for cid in first.chunk_ids[: self.s.escalation_passages]])
        trace.get_current_span().set_attribute("ragline.question_coverage", coverage)
        if coverage >= self.s.escalation_coverage:
            run.answer.route_reason += f"; one retrieval covered the question ({coverage:.2f}), no further hops"
            run.answer.hops.append(first)
            chunks = run.best_first()[: self.s.top_k]
            gen = await self.generate(run, generator_pb2.GenerationInput(query=query, context=chunks))
            self._set_answer(run, gen)
            return
        run.answer.route_reason += f"; escalated to multi-hop (question coverage {coverage:.2f})"
        await self.multihop(run, first=first, max_hops=min(self.s.max_hops, self.s.adaptive_max_hops))

    async def selfrag(self, run: Run) -> None:
        query = run.query.query
        attempt_query = query
        relevant: list[common_pb2.ScoredChunk] = []
        grade = NO
        chunks: list[common_pb2.ScoredChunk] = []
        for attempt in range(self.s.max_retries + 1):
            with tracer.start_as_current_span("orchestrator.selfrag_attempt") as span:
                span.set_attributes({"ragline.attempt": attempt, "ragline.query": attempt_query})
                # A rewrite widens the search; relevance is still judged against the question itself.
                chunks = await self.retrieve(run, attempt_query, self.s.top_k, rank_for=query)
                run.remember(chunks)
                relevant, grade = await self.grade_documents(run, query, chunks)
                span.set_attribute("ragline.relevant", len(relevant))
            if grade != NO or attempt == self.s.max_retries:
                break
            if run.budget.expired():
                run.degrade(f"deadline: stopped after {attempt + 1} retrieval attempts")
                break
            try:
                rw = await self._call(run, "rewrite", self.stages.rewrite, generator_pb2.RewriteQueryRequest(
                    query=query, previous_rewrites=run.answer.rewrites, feedback=chunks))
            except StageUnavailable as exc:
                run.degrade(f"generator {exc.reason}: query not rewritten")
                break
            if rw.query in run.answer.rewrites or rw.query == query:
                run.degrade("selfrag: rewrite repeated an earlier query, stopped")
                break
            run.answer.rewrites.append(rw.query)
            attempt_query = rw.query
        if grade == NO and self.web is not None:
            relevant, grade = await self._web_fallback(run, query)
        run.answer.grades.relevant = grade
        if grade == NO:
            run.answer.text, run.answer.not_found = NOT_FOUND[run.lang], True
            return
        gen = await self._answer_from(run, relevant)
        if not gen.not_found:
            await self._check_support(run, relevant, gen)

    async def _web_fallback(self, run: Run, query: str) -> tuple[list[common_pb2.ScoredChunk], int]:
        """The knowledge base had nothing relevant: try the web, and grade what it returns the same way."""
        assert self.web is not None
        try:
            found = await self._call(run, "websearch", self.web.search, query)
        except StageUnavailable as exc:
            run.degrade(f"websearch {exc.reason}")
            return [], NO
        run.degrade("knowledge base had nothing relevant: answered from web search")
        return await self.grade_documents(run, query, found)

    async def _check_support(self, run: Run, context: list[common_pb2.ScoredChunk], gen: generator_pb2.GenerateResponse) -> None:
        """Support: regenerate once, then mark uncertain. Usefulness: improve once."""
        query = run.query.query
        verdict = await self.grade_answer(run, query, gen.answer, context)
        if verdict is None:
            return
        if verdict.supported == NO and not run.budget.expired():
            gen = await self.generate(run, generator_pb2.GenerationInput(
                query=query, context=context, mode=generator_pb2.GENERATION_MODE_REVISE, previous_answer=gen.answer))
            self._set_answer(run, gen)
            verdict = await self.grade_answer(run, query, gen.answer, context) or verdict
        if verdict.supported == NO:
            run.answer.uncertain = True
            run.answer.text = f"{run.answer.text} {UNCERTAIN[run.lang]}"
        if verdict.useful == NO and verdict.supported != NO and not run.budget.expired():
            improved = await self.generate(run, generator_pb2.GenerationInput(
                query=query, context=context, mode=generator_pb2.GENERATION_MODE_REVISE, previous_answer=gen.answer))
            if not improved.not_found:
                self._set_answer(run, improved)
                verdict = await self.grade_answer(run, query, improved.answer, context) or verdict
        run.answer.grades.supported = verdict.supported
        run.answer.grades.useful = verdict.useful

    async def combined(self, run: Run) -> None:
        await self.multihop(run, graded=True)

    # --- entry point ------------------------------------------------------------------------

    def _flow(self, strategy: int) -> Callable[[Run], Awaitable[None]]:
        return {
            common_pb2.STRATEGY_STANDARD: self.standard,
            common_pb2.STRATEGY_MULTIHOP: self.multihop,
            common_pb2.STRATEGY_SELFRAG: self.selfrag,
            common_pb2.STRATEGY_COMBINED: self.combined,
            common_pb2.STRATEGY_LIGHT: self.light,
            common_pb2.STRATEGY_DIRECT: self.direct,
        }[strategy]

    async def run(self, query: orchestrator_pb2.FlowQuery, budget: Budget) -> common_pb2.Answer:
        if not query.query.strip():
            raise FlowError(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        if len(query.query) > self.s.max_query_chars:
            raise FlowError(grpc.StatusCode.INVALID_ARGUMENT,
                            f"query is {len(query.query)} characters; the limit is {self.s.max_query_chars}")
        if query.strategy not in common_pb2.Strategy.values():
            raise FlowError(grpc.StatusCode.INVALID_ARGUMENT, f"unknown strategy {query.strategy}")
        run = Run(query=query, budget=budget)
        strategy = query.strategy or common_pb2.STRATEGY_AUTO
        span = trace.get_current_span()
        try:
            if strategy == common_pb2.STRATEGY_AUTO:
                await self._adaptive(run)
            else:
                run.answer.strategy_used = strategy
                run.answer.route_reason = "strategy chosen by the caller"
                await self._flow(strategy)(run)
        except StageUnavailable as exc:
            raise FlowError(exc.code, str(exc)) from exc
        answer = run.answer
        answer.filters.extend(run.query.filters)
        answer.retrieved_documents.extend(dict.fromkeys(c.chunk.document_id for c in run.best_first()))
        answer.timings.extend(common_pb2.StageTiming(stage=k, millis=v) for k, v in run.timings.items())
        span.set_attributes({
            "ragline.strategy": common_pb2.Strategy.Name(answer.strategy_used),
            "ragline.query_type": common_pb2.QueryType.Name(answer.query_type),
            "ragline.intent": answer.intent,
            "ragline.filters": [f"{f.field} in {list(f.values)}" for f in answer.filters],
            "ragline.hops": len(answer.hops),
            "ragline.rewrites": len(answer.rewrites),
            "ragline.grades": f"relevant={common_pb2.Grade.Name(answer.grades.relevant)} "
                              f"supported={common_pb2.Grade.Name(answer.grades.supported)} "
                              f"useful={common_pb2.Grade.Name(answer.grades.useful)}",
            "ragline.degradations": list(answer.degradations),
            "ragline.stage_calls": answer.stage_calls,
            "ragline.not_found": answer.not_found,
            "ragline.uncertain": answer.uncertain,
        })
        return answer

    async def _adaptive(self, run: Run) -> None:
        with tracer.start_as_current_span("orchestrator.route") as span:
            try:
                route = await self._call(run, "route", self.stages.route,
                                         router_pb2.RouteRequest(query=run.query.query, tenant=run.query.tenant))
            except StageUnavailable as exc:
                run.degrade(f"router {exc.reason}: rule-based route")
                rules = route_by_rules(run.query.query)
                route = router_pb2.RouteResponse(query_type=rules.query_type, strategy=rules.strategy,
                                                  reason=rules.reason, decided_by="rules (orchestrator fallback)")
            span.set_attributes({"ragline.strategy": common_pb2.Strategy.Name(route.strategy),
                                 "ragline.route_reason": route.reason})
        run.answer.query_type = route.query_type
        run.answer.strategy_used = route.strategy
        run.answer.route_reason = route.reason
        run.answer.intent = route.intent
        if not run.query.filters and route.filters:
            run.query.filters.extend(route.filters)
            run.inferred_filters = True
        if route.decomposition:
            run.decomposition = (list(route.sub_questions), route.decomposition)
        if route.strategy == common_pb2.STRATEGY_STANDARD:
            await self.standard(run)
            return
        outer = run.budget
        run.budget = outer.child(self.s.adaptive_budget_share)
        flow = self.escalating_multihop if route.strategy == common_pb2.STRATEGY_MULTIHOP else self._flow(route.strategy)
        try:
            await flow(run)
        except (FlowError, StageUnavailable) as exc:
            if isinstance(exc, FlowError) and exc.code == grpc.StatusCode.INVALID_ARGUMENT:
                raise
            name = common_pb2.Strategy.Name(route.strategy).removeprefix("STRATEGY_").lower()
            run.degrade(f"adaptive: {name} failed ({exc}); fell back to standard")
            run.budget = outer
            run.answer.strategy_used = common_pb2.STRATEGY_STANDARD
            del run.answer.hops[:]
            await self.standard(run)
        finally:
            run.budget = outer



def quote_best_passage(chunk: common_pb2.ScoredChunk) -> generator_pb2.GenerateResponse:
    """The generator's degradation: the best passage's opening sentences, cited."""
    answer, citations = quote_lead(chunk, 2)
    return generator_pb2.GenerateResponse(answer=answer, citations=citations)
