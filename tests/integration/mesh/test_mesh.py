"""The whole mesh as `make up` runs it: health, reflection, the HTTP API, errors and one trace per request."""

from __future__ import annotations

import json

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from ragline.runtime.config import DEFAULT_PORTS
from ragline.v1 import common_pb2, ragline_pb2, ragline_pb2_grpc
from tests.integration.conftest import CORPUS, GATEWAY_GRPC, GATEWAY_HTTP, jaeger_trace, trace_services

EXPECTED_SERVICE = {
    "gateway": "ragline.v1.RaglineService",
    "router": "ragline.v1.RouterService",
    "retrieval": "ragline.v1.RetrievalService",
    "reranker": "ragline.v1.RerankerService",
    "grader": "ragline.v1.GraderService",
    "generator": "ragline.v1.GeneratorService",
    "orchestrator": "ragline.v1.OrchestratorService",
}


@pytest.mark.parametrize("service", list(EXPECTED_SERVICE))
def test_every_service_is_serving_and_reflects_its_api(service):
    port = DEFAULT_PORTS[service]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
        assert health.Check(health_pb2.HealthCheckRequest(service=EXPECTED_SERVICE[service]), timeout=5).status == 1
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
        names = {s.name for r in responses for s in r.list_services_response.service}
    assert EXPECTED_SERVICE[service] in names


def test_ingest_reports_each_document(corpus_ingested):
    results = corpus_ingested["results"]
    assert len(results) == len(list(CORPUS.glob("*.md")))
    assert all(r["chunks"] > 0 and "error" not in r for r in results)
    assert corpus_ingested["chunks_written"] == sum(r["chunks"] for r in results)


def test_ingest_with_a_bad_document_reports_it_and_keeps_the_rest(gateway):
    resp = gateway.post("/v1/documents", json={"documents": [{"id": "ok-doc", "text": "Fine text."}, {"id": "bad-doc", "text": " "}]})
    assert resp.status_code == 200
    by_id = {r["id"]: r for r in resp.json()["results"]}
    assert by_id["ok-doc"]["chunks"] == 1 and by_id["bad-doc"]["error"] == "empty document: no text and no file content"


def test_answer_cites_sources_and_one_trace_spans_every_service(gateway, corpus_ingested):
    resp = gateway.post("/v1/answer", json={"query": "Is it true that the default maximumPoolSize of HikariCP is 10?", "strategy": "auto"})
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    assert answer["strategy_used"] == "STRATEGY_SELFRAG" and answer["query_type"] == "QUERY_TYPE_NEEDS_VERIFICATION"
    assert "10" in answer["text"] and answer["citations"]
    assert answer["citations"][0]["document_id"] == "connection-pools.md"
    assert {t["stage"] for t in answer["timings"]} >= {"route", "retrieve", "rerank", "grade", "generate"}
    expected = {"ragline-gateway", "ragline-orchestrator", "ragline-router", "ragline-retrieval",
                "ragline-reranker", "ragline-grader", "ragline-generator"}
    trace = jaeger_trace(answer["trace_id"], expected, expect_operations=frozenset({"orchestrator.flow"}))
    assert trace_services(trace) >= expected
    operations = {s["operationName"] for s in trace["spans"]}
    # Weaviate's own gRPC call is in the same trace, under the retrieval service.
    assert "/weaviate.v1.Weaviate/Search" in operations
    flow = next(s for s in trace["spans"] if s["operationName"] == "orchestrator.flow")
    tags = {t["key"]: t["value"] for t in flow["tags"]}
    assert tags["ragline.strategy"] == "STRATEGY_SELFRAG"
    assert tags["ragline.intent"] == answer["intent"] == "lookup"


def test_chinese_question_is_answered_in_chinese_with_citations(gateway, corpus_ingested):
    resp = gateway.post("/v1/answer", json={"query": "CrashLoopBackOff 的重启退避上限是多少？", "strategy": "standard"})
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    assert "5 分钟" in answer["text"]
    assert answer["citations"][0]["document_id"] == "kubernetes-restart-policy.md"


def test_chinese_question_over_an_english_document_quotes_it(gateway, corpus_ingested):
    # The README's example: the pool document is in English, so no sentence shares enough words with the question.
    resp = gateway.post("/v1/answer", json={"query": "HikariCP 默认的最大连接数是多少？", "strategy": "standard"})
    answer = resp.json()
    assert not answer["not_found"] and "maximumPoolSize is 10" in answer["text"]
    assert answer["citations"][0]["document_id"] == "connection-pools.md"


@pytest.mark.parametrize("question, expected", [
    ("Could you please tell me, according to our docs, what the default connectionTimeout of HikariCP is?", "30 seconds"),
    ("麻烦告诉我一下，按照公司的运维手册，Redis 宕机时第一步要确认什么？", "redis-cli"),
])
def test_a_politely_framed_question_is_answered_like_a_plain_one(gateway, corpus_ingested, question, expected):
    answer = gateway.post("/v1/answer", json={"query": question, "strategy": "standard"}).json()
    assert expected in answer["text"] and answer["citations"]


def test_unanswerable_question_gets_the_not_found_answer_from_selfrag(gateway, corpus_ingested):
    resp = gateway.post("/v1/answer", json={"query": "Redis 集群的分片数量是多少？", "strategy": "selfrag"})
    answer = resp.json()
    assert answer["not_found"] is True and answer["text"] == "文档中没有相关信息。"
    # Nothing relevant came back for the question as asked, so a rewrite was tried before giving up.
    assert answer["rewrites"]


def test_off_topic_question_is_graded_irrelevant_even_after_rewrites(gateway, corpus_ingested):
    # Pseudo-relevance feedback adds the corpus's own words to the rewrites; what they find must still be
    # judged against the question as asked, so nothing in an operations handbook counts as relevant here.
    resp = gateway.post("/v1/answer", json={"query": "What is the capital of France?", "strategy": "selfrag"})
    answer = resp.json()
    assert answer["not_found"] is True and answer["grades"]["relevant"] == "GRADE_NO"
    assert answer["rewrites"]


def test_streaming_answer_sends_deltas_then_a_final_event(gateway, corpus_ingested):
    body = {"query": "What is the default connectionTimeout of HikariCP?", "strategy": "standard"}
    with gateway.stream("POST", "/v1/answer:stream", json=body) as resp:
        assert resp.status_code == 200
        lines = list(resp.iter_lines())
    events = [line for line in lines if line.startswith("event: ")]
    assert events[0] == "event: delta" and events[-1] == "event: final"
    final = json.loads(next(line for line in reversed(lines) if line.startswith("data: "))[6:])
    assert "30 seconds" in final["text"] and final["citations"]


def test_grpc_answer_and_stream(api_keys, corpus_ingested):
    with grpc.insecure_channel(GATEWAY_GRPC) as channel:
        stub = ragline_pb2_grpc.RaglineServiceStub(channel)
        meta = [("authorization", f"Bearer {api_keys['tests_a']}")]
        answer = stub.Answer(ragline_pb2.AnswerRequest(query="What is the default idleTimeout of HikariCP?",
                                                       strategy=common_pb2.STRATEGY_STANDARD), metadata=meta, timeout=30).answer
        assert "10 minutes" in answer.text and answer.trace_id
        events = list(stub.AnswerStream(ragline_pb2.AnswerStreamRequest(query="What is the default idleTimeout of HikariCP?"),
                                        metadata=meta, timeout=30))
        assert events[-1].HasField("final") and all(e.HasField("delta") for e in events[:-1])
        with pytest.raises(grpc.RpcError) as err:
            stub.Answer(ragline_pb2.AnswerRequest(query="x"), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_tenants_are_isolated_at_the_gateway(api_keys, corpus_ingested):
    other = {"Authorization": f"Bearer {api_keys['tests_b']}"}
    resp = httpx.post(f"{GATEWAY_HTTP}/v1/answer", headers=other, timeout=30,
                      json={"query": "What is the default maximumPoolSize of HikariCP?", "strategy": "standard"})
    assert resp.status_code == 200
    assert resp.json()["citations"] == [] and resp.json()["not_found"] is True


@pytest.mark.parametrize(
    ("headers", "body", "status", "code"),
    [
        ({}, {"query": "x"}, 401, "UNAUTHENTICATED"),
        ({"Authorization": "Bearer nope"}, {"query": "x"}, 401, "UNAUTHENTICATED"),
        (None, {"query": "   "}, 400, "INVALID_ARGUMENT"),
        (None, {"query": "x" * 5000}, 400, "INVALID_ARGUMENT"),
        (None, {"query": "x", "strategy": "psychic"}, 400, "INVALID_ARGUMENT"),
        (None, {"strategy": "auto"}, 400, "INVALID_ARGUMENT"),
        ({"X-Request-Timeout-Ms": "soon"}, {"query": "x"}, 400, "INVALID_ARGUMENT"),
    ],
)
def test_bad_requests_get_clear_errors(api_keys, headers, body, status, code):
    auth = {"Authorization": f"Bearer {api_keys['tests_a']}"}
    final = auth if headers is None else ({**auth, **headers} if "Authorization" not in headers and headers else headers)
    resp = httpx.post(f"{GATEWAY_HTTP}/v1/answer", headers=final, json=body, timeout=30)
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["code"] == code and error["message"]


def test_oversized_body_is_413(api_keys):
    resp = httpx.post(f"{GATEWAY_HTTP}/v1/documents", headers={"Authorization": f"Bearer {api_keys['tests_a']}"},
                      content=json.dumps({"documents": [{"id": "big", "text": "x" * (2 * 1024 * 1024)}]}), timeout=30)
    assert resp.status_code == 413 and resp.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


def test_health_ready_metrics_and_openapi():
    assert httpx.get(f"{GATEWAY_HTTP}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{GATEWAY_HTTP}/readyz").status_code == 200
    metrics = httpx.get(f"{GATEWAY_HTTP}/metrics").text
    assert "ragline_gateway_requests_total" in metrics
    spec = httpx.get(f"{GATEWAY_HTTP}/openapi.json").json()
    assert {"/v1/answer", "/v1/answer:stream", "/v1/documents", "/healthz", "/readyz"} <= set(spec["paths"])


def test_answer_cache_serves_repeats_until_asked_not_to(gateway, corpus_ingested):
    body = {"query": "What is the default idleTimeout of HikariCP?", "strategy": "standard"}
    first = gateway.post("/v1/answer", json=body).json()
    again = gateway.post("/v1/answer", json=body).json()
    fresh = gateway.post("/v1/answer", json=body, headers={"Cache-Control": "no-cache"}).json()
    assert again["cached"] is True and again["text"] == first["text"] and again["trace_id"] != first["trace_id"]
    assert fresh["cached"] is False


# Seed 004's own questions over the demo corpus, with the demo glossary (examples/glossary.txt) as the tenant's.
@pytest.mark.parametrize("question, cited, expected", [
    ("数据库连接池怎么配？", "connection-pools.md", "Size the pool"),
    ("线上Redis挂了怎么办？", "redis-outage-runbook.md", "Redis"),
    ("What should I do when Redis goes down in production?", "redis-outage-runbook.md", "From the documents (quoted in Chinese)"),
    ("HikariCP 的连接超时默认是多少？", "connection-pools.md", "30 seconds"),
])
@pytest.mark.parametrize("strategy", ["standard", "selfrag", "auto"])
def test_the_seed_questions_are_answered_from_the_right_document(gateway, corpus_ingested, question, cited, expected, strategy):
    answer = gateway.post("/v1/answer", json={"query": question, "strategy": strategy}).json()
    assert not answer["not_found"] and expected in answer["text"], answer["text"]
    assert cited in {c["document_id"] for c in answer["citations"]}


@pytest.mark.parametrize("strategy", ["standard", "selfrag", "auto"])
def test_a_question_the_corpus_cannot_answer_still_says_so(gateway, corpus_ingested, strategy):
    answer = gateway.post("/v1/answer", json={"query": "本季度技术部的OKR是什么？", "strategy": strategy}).json()
    assert answer["not_found"] and answer["text"] == "文档中没有相关信息。" and not answer["citations"]


def test_a_stream_that_fails_before_its_first_event_gets_the_status_code_of_the_failure(gateway, corpus_ingested):
    resp = gateway.post("/v1/answer:stream", json={"query": "What is the default maximumPoolSize of HikariCP?"},
                        headers={"X-Request-Timeout-Ms": "1"})
    assert resp.status_code == 504 and resp.json()["error"]["code"] == "DEADLINE_EXCEEDED"
