"""Recovery driven by health, not by a timer: a stage (the reranker) and Weaviate behind retrieval are killed and
started again, and answers without the degradation resume within 5 s of them serving again, although the breakers'
own reset timeout is set to 5 minutes. Each runs on processes of its own (a private Weaviate too): the shared mesh
is left alone."""

from __future__ import annotations

import os
import signal
import time
from contextlib import ExitStack

import httpx
import pytest

from tests.integration.conftest import private_weaviate, spawn

QUESTION = {"query": "What is the default maximumPoolSize of HikariCP?", "strategy": "standard"}
DEADLINE = {"X-Request-Timeout-Ms": "3000"}
RECOVERY_LIMIT_S = 5.0
BREAKERS = {"RAGLINE_BREAKER_FAIL_MAX": "2", "RAGLINE_BREAKER_RESET_TIMEOUT_S": "300"}


def _gateway(stack: ExitStack, orchestrator_port: int, grpc_port: int, http_port: int) -> str:
    stack.enter_context(spawn("gateway", grpc_port, {
        "RAGLINE_GATEWAY_PORT": str(grpc_port), "RAGLINE_GATEWAY_HTTP_PORT": str(http_port),
        "RAGLINE_ORCHESTRATOR_ADDRESSES": f"127.0.0.1:{orchestrator_port}", "RAGLINE_GATEWAY_CACHE_ENABLED": "false", **BREAKERS}))
    return f"http://127.0.0.1:{http_port}"


def _until(condition, limit_s: float, seen: list[str] | None = None) -> float:  # type: ignore[no-untyped-def]
    """Seconds until condition() held (polled every 0.1 s), or pytest.fail after limit_s with what it saw."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if condition():
            return time.monotonic() - started
        time.sleep(0.1)
    timeline = "\n".join(seen or [])
    pytest.fail(f"not recovered within {limit_s} s; the answers meanwhile:\n{timeline}")


def test_a_stage_that_serves_again_is_used_again_within_5_s(api_keys, tenant_c_corpus):
    ports = {"reranker": 50183, "orchestrator": 50186}
    headers = {"Authorization": f"Bearer {api_keys['tests_c']}", **DEADLINE}
    with ExitStack() as stack:
        reranker_env = {"RAGLINE_RERANKER_PORT": str(ports["reranker"])}
        first = stack.enter_context(spawn("services.reranker", ports["reranker"], reranker_env))
        stack.enter_context(spawn("services.orchestrator", ports["orchestrator"], {
            "RAGLINE_ORCHESTRATOR_PORT": str(ports["orchestrator"]),
            "RAGLINE_RERANKER_ADDRESSES": f"127.0.0.1:{ports['reranker']}", **BREAKERS}))
        url = _gateway(stack, ports["orchestrator"], 50180, 8030) + "/v1/answer"

        def answer() -> dict:
            return httpx.post(url, json=QUESTION, headers=headers, timeout=30).json()

        assert answer()["degradations"] == []
        first.kill()
        first.wait(10)
        for _ in range(3):
            degraded = answer()
        assert any("reranker" in d and "circuit open" in d for d in degraded["degradations"]), degraded

        with spawn("services.reranker", ports["reranker"], reranker_env):  # returns once it reports SERVING
            took = _until(lambda: answer()["degradations"] == [], RECOVERY_LIMIT_S)
        print(f"reranker: answers without the degradation {took:.2f} s after it served again")


def test_retrieval_answers_again_within_5_s_of_weaviate_serving_again(api_keys, tmp_path):
    ports = {"retrieval": 50192, "orchestrator": 50196, "weaviate_http": 8181, "weaviate_grpc": 50191}
    headers = {"Authorization": f"Bearer {api_keys['tests_c']}", **DEADLINE}
    weaviate = private_weaviate(tmp_path / "weaviate", ports["weaviate_http"], ports["weaviate_grpc"])
    with ExitStack() as stack:
        stack.callback(lambda: (weaviate.poll() is None and os.killpg(weaviate.pid, signal.SIGKILL)))
        stack.enter_context(spawn("services.retrieval", ports["retrieval"], {
            "RAGLINE_RETRIEVAL_PORT": str(ports["retrieval"]), "RAGLINE_RETRIEVAL_WEAVIATE_HTTP_PORT": str(ports["weaviate_http"]),
            "RAGLINE_RETRIEVAL_WEAVIATE_GRPC_PORT": str(ports["weaviate_grpc"])}))
        stack.enter_context(spawn("services.orchestrator", ports["orchestrator"], {
            "RAGLINE_ORCHESTRATOR_PORT": str(ports["orchestrator"]),
            "RAGLINE_RETRIEVAL_ADDRESSES": f"127.0.0.1:{ports['retrieval']}", **BREAKERS}))
        base = _gateway(stack, ports["orchestrator"], 50190, 8031)
        doc = {"id": "pools", "title": "HikariCP defaults",
               "text": "HikariCP is the default pool of Spring Boot. Its default maximumPoolSize is 10 connections."}
        stack.enter_context(spawn("gateway", 50189, {
            "RAGLINE_GATEWAY_PORT": "50189", "RAGLINE_GATEWAY_HTTP_PORT": "8032",
            "RAGLINE_RETRIEVAL_ADDRESSES": f"127.0.0.1:{ports['retrieval']}"}))
        assert httpx.post("http://127.0.0.1:8032/v1/documents", json={"documents": [doc]}, headers=headers, timeout=120).status_code == 200

        def answer() -> httpx.Response:
            return httpx.post(f"{base}/v1/answer", json=QUESTION, headers=headers, timeout=30)

        assert answer().status_code == 200
        os.killpg(weaviate.pid, signal.SIGKILL)
        weaviate.wait(10)
        statuses = [answer().status_code for _ in range(3)]
        assert all(s in (503, 504) for s in statuses), statuses  # a documented error, never a hang

        weaviate = private_weaviate(tmp_path / "weaviate", ports["weaviate_http"], ports["weaviate_grpc"])

        ready_at = time.monotonic()
        seen: list[str] = []

        def recovered() -> bool:
            resp = answer()
            seen.append(f"+{time.monotonic() - ready_at:.2f} s: {resp.status_code} {resp.text[:200]}")
            return resp.status_code == 200 and resp.json()["degradations"] == [] and "10 connections" in resp.json()["text"]

        took = _until(recovered, RECOVERY_LIMIT_S, seen)
        print(f"weaviate: answers again {took:.2f} s after it was ready")


def test_a_stage_past_its_concurrency_limit_refuses_at_once_instead_of_queueing():
    import grpc

    from ragline.v1 import common_pb2, reranker_pb2, reranker_pb2_grpc

    port = 50187
    env = {"RAGLINE_RERANKER_PORT": str(port), "RAGLINE_MAX_CONCURRENT_RPCS": "2", "RAGLINE_FAULT_DELAY_MS": "1500"}
    chunk = common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id="c", title="t", text="HikariCP pools connections."))
    with spawn("services.reranker", port, env), grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = reranker_pb2_grpc.RerankerServiceStub(channel)
        started = time.monotonic()
        finished: dict[int, float] = {}
        calls = [stub.Rerank.future(reranker_pb2.RerankRequest(query="pool", candidates=[chunk], top_k=1), timeout=10) for _ in range(4)]
        for i, call in enumerate(calls):
            call.add_done_callback(lambda _, i=i: finished.setdefault(i, time.monotonic() - started))
        codes = []
        for call in calls:
            try:
                call.result()
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as exc:
                codes.append(exc.code())
    assert codes.count(grpc.StatusCode.OK) == 2 and codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == 2, codes
    # Refused at once, not after the admitted ones (1.5 s each).
    assert all(finished[i] < 1.0 for i, code in enumerate(codes) if code == grpc.StatusCode.RESOURCE_EXHAUSTED), finished
