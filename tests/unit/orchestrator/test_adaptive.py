"""The adaptive flow: routing, fallback to standard, and auto's escalating multi-hop."""

from __future__ import annotations

import grpc

from ragline.runtime.deadlines import Budget
from ragline.v1 import common_pb2, generator_pb2
from services.orchestrator.flows import FlowError
from tests.unit.orchestrator.scripted import SETTINGS, Scripted, chunk, run


async def test_adaptive_falls_back_to_standard_when_the_chosen_flow_fails():
    s = Scripted()
    s.route_to = common_pb2.STRATEGY_MULTIHOP

    async def broken(req: generator_pb2.DecomposeRequest, budget: Budget) -> generator_pb2.DecomposeResponse:
        raise FlowError(grpc.StatusCode.INTERNAL, "boom")

    s.decompose = broken  # type: ignore[method-assign]
    answer = await run(s, "Compare A and B", common_pb2.STRATEGY_AUTO)
    assert answer.strategy_used == common_pb2.STRATEGY_STANDARD
    assert any("fell back to standard" in d for d in answer.degradations)
    assert answer.citations


async def test_adaptive_uses_rules_when_router_is_down():
    s = Scripted()
    s.down = {"router"}
    answer = await run(s, "你好", common_pb2.STRATEGY_AUTO)
    assert answer.strategy_used == common_pb2.STRATEGY_DIRECT
    assert answer.query_type == common_pb2.QUERY_TYPE_NO_RETRIEVAL
    assert "search" not in s.calls


async def test_adaptive_searches_with_the_routers_filters_and_reports_them_with_the_intent():
    s = Scripted()
    runbooks = common_pb2.MetadataFilter(field="doc_type", values=["markdown"])
    s.route_filters = [runbooks]
    answer = await run(s, "Redis is down in the runbook, how do I fix it?", common_pb2.STRATEGY_AUTO)
    assert s.searched_with == [[runbooks]]
    assert answer.intent == "troubleshoot" and list(answer.filters) == [runbooks]


async def test_auto_multihop_stops_after_one_retrieval_when_it_covers_the_question():
    s = Scripted()
    s.route_to = common_pb2.STRATEGY_MULTIHOP
    s.results = [chunk("a", "HikariCP default pool size is 10.", title="HikariCP")]
    answer = await run(s, "HikariCP default pool size?", common_pb2.STRATEGY_AUTO)
    assert "decompose" not in s.calls and len(answer.hops) == 1
    assert s.calls == ["route", "search", "rerank", "generate:GENERATION_MODE_UNSPECIFIED"]
    assert "no further hops" in answer.route_reason


async def test_auto_multihop_escalates_when_the_first_retrieval_falls_short():
    s = Scripted()
    s.route_to = common_pb2.STRATEGY_MULTIHOP
    s.results = [chunk("a", "The journal is published by the American Psychological Association.")]
    answer = await run(s, "Who was the first president of the association that publishes the journal?",
                       common_pb2.STRATEGY_AUTO)
    assert "decompose" in s.calls and s.calls[-1] == "generate:GENERATION_MODE_SYNTHESIS"
    assert "escalated to multi-hop" in answer.route_reason
    # The first retrieval is reused as hop 0, not repeated.
    assert s.calls.count("search") == len(answer.hops)


async def test_auto_multihop_stops_hopping_once_the_hops_cover_the_question():
    s = Scripted()
    s.route_to = common_pb2.STRATEGY_MULTIHOP
    question = "Who was the first president of the association that publishes the journal?"
    s.search_by_query = {
        question: [chunk("a", "The journal is published by the American Psychological Association.")],
        f"{question} American Psychological Association": [
            chunk("b", "Its first president was G. Stanley Hall, named by the Nordic Council.")],
    }
    auto = await run(s, question, common_pb2.STRATEGY_AUTO)
    # The second hop's passage covers the rest of the question, so the entity it names is not followed.
    assert len(auto.hops) == 2 and "cover the question, stopped" in auto.route_reason
    fixed = await run(s, question, common_pb2.STRATEGY_MULTIHOP)
    assert len(fixed.hops) == SETTINGS.max_hops


async def test_auto_multihop_takes_at_most_the_adaptive_hop_bound():
    s = Scripted()
    s.route_to = common_pb2.STRATEGY_MULTIHOP
    question = "Who was the first president of the association that publishes the journal?"
    # Every passage names a new entity and none covers the question, so only a hop bound stops the hops.
    s.results = [chunk("a", "The journal is published by the American Psychological Association.")]
    s.search_by_query = {f"{question} American Psychological Association": [
        chunk("b", "The American Psychological Association was chartered in Washington Heights.")]}
    auto = await run(s, question, common_pb2.STRATEGY_AUTO)
    assert SETTINGS.adaptive_max_hops == 2 < SETTINGS.max_hops
    assert len(auto.hops) == SETTINGS.adaptive_max_hops and s.calls.count("search") == 2
    fixed = await run(s, question, common_pb2.STRATEGY_MULTIHOP)
    assert len(fixed.hops) == SETTINGS.max_hops


async def test_auto_uses_the_routers_decomposition_instead_of_asking_the_generator():
    s = Scripted()
    s.route_to = common_pb2.STRATEGY_MULTIHOP
    s.route_decomposition = (["HikariCP pool size", "c3p0 pool size"], "comparison")
    s.results = [chunk("a", "Unrelated text about Oslo Harbour.")]
    answer = await run(s, "Compare HikariCP and c3p0 pool size", common_pb2.STRATEGY_AUTO)
    assert "decompose" not in s.calls
    assert [h.sub_question for h in answer.hops] == ["HikariCP pool size", "c3p0 pool size"]
