"""Serving behaviour of the shared runtime: graceful drain on SIGTERM, round-robin over replicas."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import grpc
import pytest

from ragline.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc, reranker_pb2, reranker_pb2_grpc
from tests.integration.conftest import jaeger_trace, spawn


def candidates() -> list[common_pb2.ScoredChunk]:
    return [common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=str(i), title="t", text=f"pool text {i}"), score=1.0 / (i + 1))
            for i in range(3)]


def test_sigterm_drains_in_flight_calls_and_refuses_new_ones():
    with spawn("services.reranker", 50123, {"RAGLINE_RERANKER_PORT": "50123", "RAGLINE_FAULT_DELAY_MS": "1500"}) as proc:
        channel = grpc.insecure_channel("127.0.0.1:50123")
        stub = reranker_pb2_grpc.RerankerServiceStub(channel)
        result: dict = {}

        def slow_call() -> None:
            try:
                result["response"] = stub.Rerank(reranker_pb2.RerankRequest(query="pool", candidates=candidates()), timeout=10)
            except grpc.RpcError as exc:
                result["error"] = exc

        worker = threading.Thread(target=slow_call)
        worker.start()
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        worker.join(10)
        assert "error" not in result, result.get("error")
        assert len(result["response"].results) == 3
        assert proc.wait(15) == 0
        with pytest.raises(grpc.RpcError) as err:
            stub.Rerank(reranker_pb2.RerankRequest(query="pool", candidates=candidates()), timeout=2)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        channel.close()


def test_a_stage_with_two_replicas_is_called_round_robin(tenant_c_corpus):
    with spawn("services.reranker", 50113, {"RAGLINE_RERANKER_PORT": "50113"}), \
         spawn("services.reranker", 50114, {"RAGLINE_RERANKER_PORT": "50114"}), \
         spawn("services.orchestrator", 50116, {"RAGLINE_ORCHESTRATOR_PORT": "50116",
                                                "RAGLINE_RERANKER_ADDRESSES": "127.0.0.1:50113,127.0.0.1:50114"}):
        with grpc.insecure_channel("127.0.0.1:50116") as channel:
            stub = orchestrator_pb2_grpc.OrchestratorServiceStub(channel)
            query = orchestrator_pb2.FlowQuery(tenant="tests_c", query="default maximumPoolSize of HikariCP",
                                               strategy=common_pb2.STRATEGY_STANDARD)
            trace_ids = [stub.RunFlow(orchestrator_pb2.RunFlowRequest(query=query), timeout=30).answer.trace_id
                         for _ in range(4)]
        instances = set()
        for trace_id in trace_ids:
            trace = jaeger_trace(trace_id, {"ragline-reranker"})
            for process in trace["processes"].values():
                if process["serviceName"] == "ragline-reranker":
                    instances |= {t["value"] for t in process["tags"] if t["key"] == "service.instance.id"}
        assert len(instances) == 2


@pytest.mark.parametrize("service", ["router", "retrieval", "reranker", "grader", "generator", "orchestrator", "gateway"])
def test_ragline_health_says_serving_for_a_running_stage_and_fails_for_a_missing_one(service):
    ok = subprocess.run([sys.executable, "-m", "ragline.cli", "health", service], capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0 and "SERVING" in ok.stdout, ok.stdout + ok.stderr
    missing = subprocess.run([sys.executable, "-m", "ragline.cli", "health", service, "--address", "127.0.0.1:1"],
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode == 1 and "UNAVAILABLE" in missing.stderr
