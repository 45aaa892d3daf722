"""The flows, each in its own module and each written once against the Stages interface, so the same code runs
over the mesh or in one process: standard, multi-hop, self-RAG, combined, light and direct, and adaptive, which
routes to the others. Every loop is bounded and every stage call is budgeted (calls.py).

FlowRunner validates a request, runs the chosen flow and records on the flow's span what was decided."""

from __future__ import annotations

import asyncio

import grpc
from opentelemetry import trace

from ragline.domain.strategies import strategy_name
from ragline.runtime import metrics
from ragline.runtime.call_context import MODELS_OFF
from ragline.runtime.clients import StageUnavailable
from ragline.runtime.deadlines import Budget
from ragline.v1 import common_pb2, orchestrator_pb2
from services.orchestrator.config import OrchestratorSettings
from services.orchestrator.flows.adaptive import Flow, adaptive
from services.orchestrator.flows.calls import StageCalls
from services.orchestrator.flows.combined import combined
from services.orchestrator.flows.light import direct, light
from services.orchestrator.flows.multihop import multihop
from services.orchestrator.flows.selfrag import selfrag
from services.orchestrator.flows.standard import standard
from services.orchestrator.flows.state import FlowError, Run
from services.orchestrator.spend import Allowance, TenantSpend
from services.orchestrator.stages import Stages
from services.orchestrator.websearch import WebSearch

__all__ = ["FLOWS", "FlowError", "FlowRunner", "Run"]

FLOWS: dict[int, Flow] = {
    common_pb2.STRATEGY_STANDARD: standard,
    common_pb2.STRATEGY_MULTIHOP: multihop,
    common_pb2.STRATEGY_SELFRAG: selfrag,
    common_pb2.STRATEGY_COMBINED: combined,
    common_pb2.STRATEGY_LIGHT: light,
    common_pb2.STRATEGY_DIRECT: direct,
}


class FlowRunner:
    def __init__(self, stages: Stages, settings: OrchestratorSettings, web: WebSearch | None = None,
                 spend: TenantSpend | None = None) -> None:
        self.calls = StageCalls(stages, settings, web)
        self.settings = settings
        self.spend = spend

    def _validate(self, query: orchestrator_pb2.FlowQuery) -> None:
        if not query.query.strip():
            raise FlowError(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        limit = self.settings.max_query_chars
        if len(query.query) > limit:
            raise FlowError(grpc.StatusCode.INVALID_ARGUMENT, f"query is {len(query.query)} characters; the limit is {limit}")
        if query.strategy not in common_pb2.Strategy.values():
            raise FlowError(grpc.StatusCode.INVALID_ARGUMENT, f"unknown strategy {query.strategy}")

    async def run(self, query: orchestrator_pb2.FlowQuery, budget: Budget,
                  deltas: asyncio.Queue[str] | None = None) -> common_pb2.Answer:
        """The answer to a query; with deltas, a flow whose last generation is its answer puts the model's tokens
        there as they come."""
        self._validate(query)
        run = Run(query=query, budget=budget, deltas=deltas)
        strategy = query.strategy or common_pb2.STRATEGY_AUTO
        allowance = await self.spend.allowance(query.tenant) if self.spend is not None else Allowance()
        run.allowance = allowance
        if allowance.applies_to_every_answer:
            run.degrade(allowance.note)
        # A tenant whose model budget is spent: every stage this run calls answers with its offline backend.
        models_off = MODELS_OFF.set(True) if not allowance.models else None
        try:
            if strategy == common_pb2.STRATEGY_AUTO:
                await adaptive(self.calls, run, FLOWS.__getitem__)
            else:
                run.answer.strategy_used = strategy
                run.answer.route_reason = "strategy chosen by the caller"
                await FLOWS[strategy](self.calls, run)
        except StageUnavailable as exc:
            raise FlowError(exc.code, str(exc)) from exc
        finally:
            if models_off is not None:
                MODELS_OFF.reset(models_off)
        answer = run.answer
        if self.spend is not None:
            await self.spend.add(query.tenant, answer.usage)
        answer.filters.extend(run.query.filters)
        answer.retrieved_documents.extend(dict.fromkeys(c.chunk.document_id for c in run.best_first()))
        answer.timings.extend(common_pb2.StageTiming(stage=k, millis=v) for k, v in run.timings.items())
        _record_decisions(answer)
        return answer


def _record_decisions(answer: common_pb2.Answer) -> None:
    """What the flow decided, on the current (orchestrator.flow) span, what an SRE filters traces by, and in the
    metrics that a dashboard sums."""
    g = answer.grades
    metrics.STRATEGY.labels(strategy_name(answer.strategy_used), common_pb2.QueryType.Name(answer.query_type)).inc()
    metrics.HOPS.observe(len(answer.hops))
    metrics.REWRITES.inc(len(answer.rewrites))
    for kind, grade in (("relevant", g.relevant), ("supported", g.supported), ("useful", g.useful)):
        if grade != common_pb2.GRADE_UNSPECIFIED:
            metrics.GRADES.labels(kind, "pass" if grade == common_pb2.GRADE_YES else "fail").inc()
    for d in answer.degradations:
        metrics.DEGRADATIONS.labels(metrics.degradation_kind(d)).inc()
    metrics.LLM_CALLS.inc(answer.llm_calls)
    metrics.LLM_TOKENS.labels("prompt").inc(answer.usage.prompt_tokens)
    metrics.LLM_TOKENS.labels("completion").inc(answer.usage.completion_tokens)
    metrics.LLM_COST.inc(answer.usage.cost_usd)
    trace.get_current_span().set_attributes({
        "ragline.strategy": common_pb2.Strategy.Name(answer.strategy_used),
        "ragline.query_type": common_pb2.QueryType.Name(answer.query_type),
        "ragline.intent": answer.intent,
        "ragline.filters": [f"{f.field} in {list(f.values)}" for f in answer.filters],
        "ragline.hops": len(answer.hops),
        "ragline.rewrites": len(answer.rewrites),
        "ragline.grades": f"relevant={common_pb2.Grade.Name(g.relevant)} supported={common_pb2.Grade.Name(g.supported)} "
                          f"useful={common_pb2.Grade.Name(g.useful)}",
        "ragline.degradations": list(answer.degradations),
        "ragline.stage_calls": answer.stage_calls,
        "ragline.not_found": answer.not_found,
        "ragline.uncertain": answer.uncertain,
    })
