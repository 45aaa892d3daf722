"""Every stage call's degradation, the deadline, the request's validation and the router's filters."""

from __future__ import annotations

import grpc
import pytest

from ragline.runtime.deadlines import Budget
from ragline.v1 import common_pb2, orchestrator_pb2
from services.orchestrator.flows import FlowError, FlowRunner
from tests.unit.orchestrator.scripted import SETTINGS, Scripted, run


async def test_reranker_open_keeps_fused_order_and_says_so():
    s = Scripted()
    s.down = {"reranker"}
    answer = await run(s, "pool size?", common_pb2.STRATEGY_STANDARD)
    assert answer.text.startswith("HikariCP")
    assert any("reranker" in d and "fused" in d for d in answer.degradations)


async def test_a_tenant_set_to_keep_the_fused_order_is_not_reranked():
    s = Scripted()
    settings = SETTINGS.model_copy(update={"tenant_rerank": {"t": False}})
    answer = await FlowRunner(s, settings).run(
        orchestrator_pb2.FlowQuery(tenant="t", query="pool size?", strategy=common_pb2.STRATEGY_STANDARD), Budget(5, 0.01))
    assert "rerank" not in s.calls and answer.text and not answer.degradations
    other = Scripted()
    await run(other, "pool size?", common_pb2.STRATEGY_STANDARD)  # another tenant still is
    assert "rerank" in other.calls


async def test_retrieval_down_is_unavailable():
    s = Scripted()
    s.down = {"retrieval"}
    with pytest.raises(FlowError) as err:
        await run(s, "pool size?", common_pb2.STRATEGY_STANDARD)
    assert err.value.code == grpc.StatusCode.UNAVAILABLE


async def test_generator_down_quotes_best_passage():
    s = Scripted()
    s.down = {"generator"}
    answer = await run(s, "pool size?", common_pb2.STRATEGY_STANDARD)
    assert answer.text.endswith("[1]") and any("generator" in d for d in answer.degradations)


async def test_grader_down_answers_with_unknown_grades():
    s = Scripted()
    s.down = {"grader"}
    answer = await run(s, "pool size?", common_pb2.STRATEGY_SELFRAG)
    assert answer.text and answer.grades.relevant == common_pb2.GRADE_UNSPECIFIED
    assert any("grader" in d for d in answer.degradations)


async def test_deadline_cut_off_returns_deadline_exceeded_when_nothing_found():
    s = Scripted()
    with pytest.raises(FlowError) as err:
        await run(s, "pool size?", common_pb2.STRATEGY_STANDARD, seconds=0.005)
    assert err.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_invalid_input_is_invalid_argument():
    with pytest.raises(FlowError) as err:
        await run(Scripted(), "  ", common_pb2.STRATEGY_STANDARD)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(FlowError) as err:
        await run(Scripted(), "q", 99)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT


async def test_filters_read_from_the_question_are_dropped_when_they_match_nothing():
    s = Scripted()
    s.route_filters = [common_pb2.MetadataFilter(field="doc_type", values=["code"])]
    s.filtered_results = []
    answer = await run(s, "Where in the source code is the pool size set?", common_pb2.STRATEGY_AUTO)
    assert [len(f) for f in s.searched_with] == [1, 0] and answer.citations and not answer.filters
    assert any("searched without them" in d for d in answer.degradations)


async def test_the_callers_own_filters_are_kept_even_when_they_match_nothing():
    s = Scripted()
    s.filtered_results = []
    runner = FlowRunner(s, SETTINGS)
    wanted = common_pb2.MetadataFilter(field="doc_type", values=["code"])
    answer = await runner.run(orchestrator_pb2.FlowQuery(tenant="t", query="pool size?", strategy=common_pb2.STRATEGY_AUTO,
                                                         filters=[wanted]), Budget(5, 0.01))
    assert len(s.searched_with) == 1 and answer.not_found and list(answer.filters) == [wanted]
