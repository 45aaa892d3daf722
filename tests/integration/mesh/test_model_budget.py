"""A tenant's daily model budget, counted in the real Redis: the spend of each answer recorded and exported, auto
stepping down near the cap, and no model called once it is spent — each said in the answer. The model is the paid-
API double (its token counts are fixed), so the spend is known exactly."""

from __future__ import annotations

import datetime as dt

import grpc
import httpx
import pytest
import redis

from ragline.dev.processes import thinking_mesh
from ragline.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc
from tests.integration.doubles import PaidApiDouble

PORTS = {"router": 50161, "grader": 50164, "generator": 50165, "orchestrator": 50166}
METRICS_PORT = 9571
TENANT = "tests_c"
BUDGET = 100_000
KEY = f"ragline:model-tokens:{TENANT}:{dt.datetime.now(dt.UTC).date().isoformat()}"


@pytest.fixture(scope="module")
def orchestrator(tenant_c_corpus):
    with PaidApiDouble(18091) as double, thinking_mesh(
            PORTS, {"OPENAI_BASE_URL": f"{double.base_url}/v1", "OPENAI_API_KEY": "sk-test"},
            {"RAGLINE_METRICS_PORT": str(METRICS_PORT), "RAGLINE_ORCHESTRATOR_TENANT_MODEL_TOKENS_PER_DAY": f'{{"{TENANT}": {BUDGET}}}'},
            "test-budget"):
        yield orchestrator_pb2_grpc.OrchestratorServiceStub(grpc.insecure_channel(f"127.0.0.1:{PORTS['orchestrator']}"))


@pytest.fixture
def spent():
    store = redis.Redis(port=6379)
    store.delete(KEY)
    yield store
    store.delete(KEY)


def ask(stub, question: str) -> common_pb2.Answer:  # type: ignore[no-untyped-def]
    query = orchestrator_pb2.FlowQuery(tenant=TENANT, query=question, strategy=common_pb2.STRATEGY_AUTO)
    return stub.RunFlow(orchestrator_pb2.RunFlowRequest(query=query), timeout=60).answer


def test_each_answers_tokens_are_counted_in_redis_and_exported(orchestrator, spent):
    answer = ask(orchestrator, "What is the default maximumPoolSize of HikariCP?")
    tokens = answer.usage.prompt_tokens + answer.usage.completion_tokens
    assert answer.llm_calls >= 1 and tokens > 0 and not answer.degradations
    assert int(spent.get(KEY)) == tokens and 0 < spent.ttl(KEY) <= 2 * 24 * 3600
    metrics = httpx.get(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5).text
    assert f'ragline_tenant_model_tokens_total{{kind="prompt",tenant="{TENANT}"}}' in metrics


def test_near_the_cap_auto_steps_down_and_says_so(orchestrator, spent):
    spent.set(KEY, int(BUDGET * 0.95))
    answer = ask(orchestrator, "What is the maximumPoolSize of the pool that Spring Boot uses by default?")
    assert answer.strategy_used == common_pb2.STRATEGY_STANDARD
    assert any("95%" in d and "stepped down to standard" in d for d in answer.degradations), answer.degradations
    assert answer.llm_calls >= 1  # still answered by the model, at standard cost


def test_once_spent_no_model_is_called_and_the_answer_says_so(orchestrator, spent):
    spent.set(KEY, BUDGET)
    answer = ask(orchestrator, "What is the default maximumPoolSize of HikariCP?")
    assert answer.llm_calls == 0 and answer.text
    assert any("the offline backends answered, no model was called" in d for d in answer.degradations), answer.degradations
    # The stages' fallbacks are not reported as model failures: no model was asked.
    assert not [d for d in answer.degradations if "the model failed" in d]
