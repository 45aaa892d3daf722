"""Load at the benchmark's gateway per strategy and transport, and where each strategy's time goes (checked
against the traces Jaeger stored)."""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Awaitable, Callable

import grpc
import httpx

from bench.common import API_KEY, BENCH_GRPC_PORT, BENCH_HTTP_PORT, QUESTIONS, STRATEGIES, timed_loop
from bench.stats import spreads, stats
from ragline.v1 import (
    common_pb2,
    ragline_pb2,
    ragline_pb2_grpc,
)


async def gateway_load(levels_by_strategy: dict[str, list[int]], seconds: float, rounds: int) -> list[dict]:
    """Closed-loop load at the benchmark's gateway, over HTTP for every strategy and over gRPC for standard;
    each level is run `rounds` times, the rounds alternating across levels so drift hits them all."""
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{BENCH_HTTP_PORT}", headers=headers, timeout=30,
                                 limits=httpx.Limits(max_connections=64)) as client, \
            grpc.aio.insecure_channel(f"127.0.0.1:{BENCH_GRPC_PORT}") as channel:
        stub = ragline_pb2_grpc.RaglineServiceStub(channel)
        counter = iter(range(10**9))

        def http_call(strategy: str) -> Callable[[], Awaitable[object]]:
            async def call() -> None:
                resp = await client.post("/v1/answer", json={"query": QUESTIONS[next(counter) % len(QUESTIONS)],
                                                              "strategy": strategy})
                resp.raise_for_status()
            return call

        def grpc_call(strategy: str) -> Callable[[], Awaitable[object]]:
            enum = common_pb2.Strategy.Value(f"STRATEGY_{strategy.upper()}")
            return lambda: stub.Answer(ragline_pb2.AnswerRequest(query=QUESTIONS[next(counter) % len(QUESTIONS)],
                                                                 strategy=enum),
                                       metadata=(("authorization", f"Bearer {API_KEY}"),), timeout=30)

        plan = [("http", s, level, http_call(s)) for s, levels in levels_by_strategy.items() for level in levels]
        plan += [("grpc", s, level, grpc_call(s)) for s, levels in levels_by_strategy.items() for level in levels]
        runs: dict[tuple[str, str, int], list[dict]] = {}
        for _ in range(rounds):
            for transport, strategy, level, call in plan:
                lat, errors, elapsed = await timed_loop(call, level, seconds, 2000)
                runs.setdefault((transport, strategy, level), []).append(
                    {"qps": len(lat) / elapsed, **stats(lat), "error_rate": errors / max(1, errors + len(lat))})
    return [{"transport": t, "strategy": s, "concurrency": c,
             **spreads(rs, ("qps", "p50", "p95", "p99", "error_rate"))}
            for (t, s, c), rs in runs.items()]


# The orchestrator's client span of each stage call, and the retrieval service's own spans, by the stage
# name the answer's timings use.
SPAN_STAGE = {
    "/ragline.v1.RouterService/Route": "route", "/ragline.v1.RetrievalService/Search": "retrieve",
    "/ragline.v1.RerankerService/Rerank": "rerank", "/ragline.v1.GraderService/GradeDocuments": "grade",
    "/ragline.v1.GraderService/GradeAnswer": "grade", "/ragline.v1.GeneratorService/Generate": "generate",
    "/ragline.v1.GeneratorService/Decompose": "decompose", "/ragline.v1.GeneratorService/RewriteQuery": "rewrite",
    "retrieval.embed_query": "retrieve.embed", "weaviate.hybrid": "retrieve.weaviate_hybrid",
}


def jaeger_stage_ms(trace: dict) -> dict[str, float]:
    processes = {pid: p["serviceName"] for pid, p in trace["processes"].items()}
    out: dict[str, float] = {}
    for span in trace["spans"]:
        service = processes[span["processID"]]
        stage = SPAN_STAGE.get(span["operationName"])
        is_client = any(t["key"] == "span.kind" and t["value"] == "client" for t in span.get("tags", []))
        if stage and ((service == "ragline-orchestrator" and is_client) or service == "ragline-retrieval"
                      and stage.startswith("retrieve.")):
            out[stage] = out.get(stage, 0.0) + span["duration"] / 1000
    return out


async def per_strategy(concurrency: int, seconds: float, sample: int, rounds: int) -> dict[str, dict]:
    """Where the time goes, from the answers' own stage timings under light load (medians over rounds); then,
    for `sample` answers a strategy, the same stages summed from the trace Jaeger stored for them."""
    runs: dict[str, list[dict]] = {}
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{BENCH_HTTP_PORT}", headers=headers, timeout=60) as client:
        for _ in range(rounds):
            for strategy in STRATEGIES:
                timings: dict[str, list[float]] = {}
                calls: list[int] = []
                counter = iter(range(10**9))

                async def call(strategy: str = strategy, timings: dict = timings, calls: list = calls, counter=counter) -> None:
                    resp = await client.post("/v1/answer", json={"query": QUESTIONS[next(counter) % len(QUESTIONS)],
                                                                  "strategy": strategy})
                    resp.raise_for_status()
                    body = resp.json()
                    calls.append(body["stage_calls"])
                    for t in body["timings"]:
                        timings.setdefault(t["stage"], []).append(t["millis"])

                lat, errors, _ = await timed_loop(call, concurrency, seconds, 500)
                n = max(1, len(lat))
                runs.setdefault(strategy, []).append({**stats(lat), "errors": errors, "stage_calls": statistics.mean(calls) if calls else 0,
                                                      "stages_ms": {k: sum(v) / n for k, v in sorted(timings.items())}})
        out: dict[str, dict] = {}
        for strategy, rs in runs.items():
            stages = sorted({k for r in rs for k in r["stages_ms"]})
            out[strategy] = {**spreads(rs, ("p50", "p95")),
                             "errors": sum(r["errors"] for r in rs), "stage_calls": statistics.median(r["stage_calls"] for r in rs),
                             "stages_ms": {k: statistics.median(r["stages_ms"].get(k, 0.0) for r in rs) for k in stages}}
        checks = []
        for strategy in STRATEGIES:
            for i in range(sample):
                body = (await client.post("/v1/answer", json={"query": QUESTIONS[i % len(QUESTIONS)],
                                                               "strategy": strategy})).json()
                checks.append((strategy, body["trace_id"], {t["stage"]: t["millis"] for t in body["timings"]}))
        await asyncio.sleep(3)  # spans are exported in batches, about once a second
        async with httpx.AsyncClient(base_url="http://127.0.0.1:16686", timeout=10) as jaeger:
            for strategy, trace_id, answer_ms in checks:
                resp = await jaeger.get(f"/api/traces/{trace_id}")
                found = resp.json().get("data") or [] if resp.status_code == 200 else []
                traced = jaeger_stage_ms(found[0]) if found else {}
                side = out[strategy].setdefault("jaeger", {"traces_found": 0, "sampled": 0, "answer": {}, "trace": {}})
                side["sampled"] += 1
                side["traces_found"] += bool(found)
                for stage, ms in answer_ms.items():
                    if stage in SPAN_STAGE.values() and found:
                        side["answer"][stage] = side["answer"].get(stage, 0.0) + ms / sample
                        side["trace"][stage] = side["trace"].get(stage, 0.0) + traced.get(stage, 0.0) / sample
    return out
