"""Self-RAG: grade each passage against the question; with none relevant, rewrite the query and search again
(a bounded number of times), then try the web if it is configured, then answer "not found". A supported,
useful answer is checked as the other graded flows check theirs."""

from __future__ import annotations

from opentelemetry import trace

from ragline.v1 import common_pb2
from services.orchestrator.flows.calls import StageCalls
from services.orchestrator.flows.standard import answer_from
from services.orchestrator.flows.state import NO, Run
from services.orchestrator.flows.support import agree_with_grades, check_support

tracer = trace.get_tracer("ragline.orchestrator")


async def selfrag(calls: StageCalls, run: Run) -> None:
    query = run.query.query
    attempt_query = query
    relevant: list[common_pb2.ScoredChunk] = []
    grade = NO
    chunks: list[common_pb2.ScoredChunk] = []
    for attempt in range(calls.settings.max_retries + 1):
        with tracer.start_as_current_span("orchestrator.selfrag_attempt") as span:
            span.set_attributes({"ragline.attempt": attempt, "ragline.query": attempt_query})
            # A rewrite widens the search; relevance is still judged against the question itself.
            chunks = await calls.retrieve(run, attempt_query, calls.settings.top_k, rank_for=query)
            run.remember(chunks)
            relevant, grade = await calls.grade_documents(run, query, chunks)
            span.set_attribute("ragline.relevant", len(relevant))
        if grade != NO or attempt == calls.settings.max_retries:
            break
        if run.budget.expired():
            run.degrade(f"deadline: stopped after {attempt + 1} retrieval attempts")
            break
        rewritten = await calls.rewrite(run, query, chunks)
        if rewritten is None:
            break
        if rewritten in run.answer.rewrites or rewritten == query:
            run.degrade("selfrag: rewrite repeated an earlier query, stopped")
            break
        run.answer.rewrites.append(rewritten)
        attempt_query = rewritten
    if grade == NO and calls.web is not None:
        # The knowledge base had nothing relevant: grade what the web returns the same way.
        relevant, grade = await calls.grade_documents(run, query, await calls.web_search(run, query))
    run.answer.grades.relevant = grade
    if grade == NO:
        run.answer_not_found()
        return
    gen = await agree_with_grades(calls, run, relevant, await answer_from(calls, run, relevant))
    if not gen.not_found:
        await check_support(calls, run, relevant, gen)
