"""Every stage exports Prometheus metrics on its documented port, and they move with real requests; the Grafana
dashboard asks only for metrics that the services export."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import grpc
import httpx
from prometheus_client.parser import text_string_to_metric_families

from ragline.runtime.config import GATEWAY_HTTP_PORT
from ragline.runtime.metrics import METRICS_PORTS
from ragline.v1 import ragline_pb2, ragline_pb2_grpc
from tests.integration.conftest import GATEWAY_GRPC

ENDPOINTS = {**{name: f"http://127.0.0.1:{port}/metrics" for name, port in METRICS_PORTS.items()},
             "gateway": f"http://127.0.0.1:{GATEWAY_HTTP_PORT}/metrics"}
DASHBOARD = Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "ragline-dashboard.json"


def scrape(url: str) -> dict[str, float]:
    """Sample name -> the sum of its values over every label set."""
    totals: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(httpx.get(url, timeout=10).text):
        for sample in family.samples:
            totals[sample.name] += sample.value
    return totals


def grpc_ok(samples: dict[str, float]) -> float:
    return samples.get("ragline_grpc_server_handled_total", 0.0)


def test_every_stage_exports_metrics_that_move_with_real_requests(gateway, corpus_ingested):
    before = {name: scrape(url) for name, url in ENDPOINTS.items()}
    for strategy in ("auto", "selfrag", "standard"):
        resp = gateway.post("/v1/answer", json={"query": "What is the default connectionTimeout of HikariCP?", "strategy": strategy})
        assert resp.status_code == 200, resp.text
    # A multi-hop question routed by the router, answered over several hops.
    assert gateway.post("/v1/answer", json={
        "query": "What storage does the payments service use, and why did its connection pool run out in March 2024?"}).status_code == 200
    doc = {"id": "metrics-probe", "title": "Probe", "text": "A document ingested to see the ingest counters move."}
    assert gateway.post("/v1/documents", json={"documents": [doc]}).status_code == 200
    # And the gateway's gRPC API, which its HTTP requests do not pass through.
    with grpc.insecure_channel(GATEWAY_GRPC) as channel:
        ragline_pb2_grpc.RaglineServiceStub(channel).Answer(
            ragline_pb2.AnswerRequest(query="What is the default maximumPoolSize of HikariCP?"),
            metadata=[("authorization", gateway.headers["Authorization"])], timeout=30)
    after = {name: scrape(url) for name, url in ENDPOINTS.items()}
    assert after["gateway"]["ragline_gateway_requests_total"] >= before["gateway"].get("ragline_gateway_requests_total", 0) + 5

    for name in ENDPOINTS:
        assert grpc_ok(after[name]) > grpc_ok(before[name]), f"{name}: no gRPC call counted"
        assert after[name]["ragline_grpc_server_handling_seconds_count"] > before[name].get("ragline_grpc_server_handling_seconds_count", 0)
        assert "ragline_grpc_server_in_flight" in after[name]
    orchestrator = after["orchestrator"]
    moved = {m for m in ("ragline_strategy_total", "ragline_hops_count", "ragline_grades_total")
             if orchestrator.get(m, 0) > before["orchestrator"].get(m, 0)}
    assert moved == {"ragline_strategy_total", "ragline_hops_count", "ragline_grades_total"}
    assert "ragline_breaker_state" in orchestrator and "ragline_breaker_state" in after["gateway"]
    assert after["gateway"]["ragline_answer_cache_total"] > before["gateway"].get("ragline_answer_cache_total", 0)
    assert after["retrieval"]["ragline_ingest_documents_total"] > before["retrieval"].get("ragline_ingest_documents_total", 0)
    assert after["retrieval"]["ragline_ingest_chunks_total"] > before["retrieval"].get("ragline_ingest_chunks_total", 0)


def test_every_dashboard_query_names_a_metric_the_services_export(gateway, corpus_ingested):
    gateway.post("/v1/answer", json={"query": "What is the default maximumPoolSize of HikariCP?"})
    exported = {name for url in ENDPOINTS.values() for name in scrape(url)}
    panels = json.loads(DASHBOARD.read_text(encoding="utf-8"))["panels"]
    queries = [t["expr"] for p in panels for t in p.get("targets", [])]
    assert len(queries) >= 12
    named = {m for q in queries for m in re.findall(r"\b(ragline_[a-z0-9_]+)", q)}
    assert named and named <= exported, f"not exported: {sorted(named - exported)}"
    titles = " ".join(p["title"].lower() for p in panels)
    for wanted in ("request rate", "error", "p50", "p95", "p99", "strategy", "degradation", "cache hit", "tokens"):
        assert wanted in titles, f"no panel about {wanted}"
