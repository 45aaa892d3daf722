"""Adaptive (auto): the router picks the flow. A multi-hop route first tries one retrieval and takes more hops
only when it does not cover the question. The chosen flow gets a share of the budget; if it fails or runs out,
standard RAG answers with what is left, and the answer says so."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc
from opentelemetry import trace

from ragline.domain.lexical import question_coverage
from ragline.domain.strategies import strategy_name
from ragline.runtime.clients import StageUnavailable
from ragline.v1 import common_pb2, generator_pb2
from services.orchestrator.flows.calls import StageCalls
from services.orchestrator.flows.multihop import hop, multihop
from services.orchestrator.flows.standard import standard
from services.orchestrator.flows.state import FlowError, Run
from services.orchestrator.spend import capped

tracer = trace.get_tracer("ragline.orchestrator")
Flow = Callable[[StageCalls, Run], Awaitable[None]]


async def adaptive(calls: StageCalls, run: Run, flow_for: Callable[[int], Flow]) -> None:
    """`flow_for` maps a routed strategy to its flow (the runner's table; multi-hop is replaced here)."""
    with tracer.start_as_current_span("orchestrator.route") as span:
        route = await calls.route(run)
        span.set_attributes({"ragline.strategy": common_pb2.Strategy.Name(route.strategy),
                             "ragline.route_reason": route.reason})
    run.answer.query_type = route.query_type
    strategy = capped(route.strategy, run.allowance.cap)
    if strategy != route.strategy:
        run.degrade(f"{run.allowance.note}: {strategy_name(route.strategy)} stepped down to {strategy_name(strategy)}")
        route.strategy = strategy
    run.answer.strategy_used = route.strategy
    run.answer.route_reason = route.reason
    run.answer.intent = route.intent
    if not run.query.filters and route.filters:
        run.query.filters.extend(route.filters)
        run.inferred_filters = True
    if route.decomposition:
        run.decomposition = (list(route.sub_questions), route.decomposition)
    if route.strategy == common_pb2.STRATEGY_STANDARD:
        await standard(calls, run)
        return
    outer = run.budget
    run.budget = outer.child(calls.settings.adaptive_budget_share)
    flow = escalating_multihop if route.strategy == common_pb2.STRATEGY_MULTIHOP else flow_for(route.strategy)
    try:
        await flow(calls, run)
    except (FlowError, StageUnavailable) as exc:
        if isinstance(exc, FlowError) and exc.code == grpc.StatusCode.INVALID_ARGUMENT:
            raise
        run.degrade(f"adaptive: {strategy_name(route.strategy)} failed ({exc}); fell back to standard")
        run.budget = outer
        run.answer.strategy_used = common_pb2.STRATEGY_STANDARD
        del run.answer.hops[:]
        await standard(calls, run)
    finally:
        run.budget = outer


async def escalating_multihop(calls: StageCalls, run: Run) -> None:
    """auto's multi-hop: retrieve for the whole question first, and take more hops only when the best passages
    do not cover what the question asks; otherwise answer at standard cost."""
    s = calls.settings
    query = run.query.query
    first = await hop(calls, run, 0, query, graded=False, generate=False)
    coverage = question_coverage(query, [run.seen[cid] for cid in first.chunk_ids[: s.escalation_passages]])
    trace.get_current_span().set_attribute("ragline.question_coverage", coverage)
    if coverage >= s.escalation_coverage:
        run.answer.route_reason += f"; one retrieval covered the question ({coverage:.2f}), no further hops"
        run.answer.hops.append(first)
        chunks = run.best_first()[: s.top_k]
        gen = await calls.generate(run, generator_pb2.GenerationInput(query=query, context=chunks))
        run.set_answer(gen)
        return
    run.answer.route_reason += f"; escalated to multi-hop (question coverage {coverage:.2f})"
    await multihop(calls, run, first=first, max_hops=min(s.max_hops, s.adaptive_max_hops))
