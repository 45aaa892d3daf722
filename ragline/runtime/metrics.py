"""Prometheus metrics, the same in every process: gRPC requests, errors by status code, latency by method and calls
in flight (recorded by the shared server interceptor), the state of each circuit breaker, and the domain metrics
of the stages (strategies, hops, rewrites, grades, degradations, cache, model calls, tokens and cost, ingestion).
Each stage serves them over HTTP on its own port (METRICS_PORTS; the gateway on its HTTP port, /metrics).

No maintained interceptor records these for grpc.aio servers (py-grpc-prometheus 0.8 wraps sync servers only, and
OpenTelemetry's gRPC instrumentation records spans, not metrics), so the interceptor in runtime/server.py records
them with prometheus_client's instruments and exposition."""

from __future__ import annotations

import logging

from prometheus_client import Counter, Gauge, Histogram, start_http_server

log = logging.getLogger(__name__)

# Documented, fixed ports of each stage's /metrics (the gateway serves its own on its HTTP port).
METRICS_PORTS = {"router": 9461, "retrieval": 9462, "reranker": 9463, "grader": 9464, "generator": 9465, "orchestrator": 9466}
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

GRPC_HANDLED = Counter("ragline_grpc_server_handled_total", "gRPC calls finished, by method and status code",
                       ["service", "method", "code"])
GRPC_SECONDS = Histogram("ragline_grpc_server_handling_seconds", "gRPC call latency by method",
                         ["service", "method"], buckets=LATENCY_BUCKETS)
GRPC_IN_FLIGHT = Gauge("ragline_grpc_server_in_flight", "gRPC calls being handled now", ["service", "method"])
BREAKER_STATE = Gauge("ragline_breaker_state", "Circuit breaker per downstream stage: 0 closed, 1 half-open, 2 open",
                      ["downstream"])
BREAKER_LEVEL = {"closed": 0, "half-open": 1, "open": 2}

# The orchestrator's decisions.
STRATEGY = Counter("ragline_strategy_total", "Answers by strategy used and query type", ["strategy", "query_type"])
HOPS = Histogram("ragline_hops", "Hops per answer", buckets=(0, 1, 2, 3, 4, 5, 10))
REWRITES = Counter("ragline_rewrites_total", "Query rewrites made by self-RAG")
GRADES = Counter("ragline_grades_total", "Grades of answers by kind (relevant, supported, useful) and result",
                 ["kind", "grade"])
DEGRADATIONS = Counter("ragline_degradations_total", "Degradations named in answers, by the part that degraded", ["kind"])
LLM_CALLS = Counter("ragline_llm_calls_total", "Model calls made for answers")
LLM_TOKENS = Counter("ragline_llm_tokens_total", "Model tokens used for answers", ["kind"])
LLM_COST = Counter("ragline_llm_cost_usd_total", "Estimated model cost of answers, USD")
# The gateway's cache and retrieval's ingestion.
CACHE = Counter("ragline_answer_cache_total", "Answer cache lookups by result (hit, miss)", ["result"])
INGEST_DOCUMENTS = Counter("ragline_ingest_documents_total", "Documents ingested, by result (ok, failed)", ["result"])
INGEST_CHUNKS = Counter("ragline_ingest_chunks_total", "Chunks written by ingestion")


def serve_metrics(service: str, host: str, port: int) -> None:
    """Serve this process's metrics on host:port (0: not at all); a port already taken stops the service."""
    if not port:
        return
    try:
        start_http_server(port, addr=host)
    except OSError as exc:
        raise SystemExit(f"ragline-{service}: cannot serve metrics on {host}:{port} ({exc}); set RAGLINE_METRICS_PORT") from exc
    log.info("ragline-%s metrics on http://%s:%d/metrics", service, host, port)


def degradation_kind(degradation: str) -> str:
    """The part that degraded, as a label of few values: 'reranker', 'grader', 'adaptive', 'deadline', ..."""
    return degradation.split(" ", 1)[0].rstrip(":").lower()
