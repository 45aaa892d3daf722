"""With the local model (llama-cpp-python's server, SmolLM2-135M; `RAGLINE_LOCAL_LLM`), where a request's time goes
per strategy — the model, retrieval, reranking and the rest (the mesh, the stages' own logic) — from the spans Jaeger
stored for each answer; the model's tokens per second; and the time to its first token, seen by a streaming client
and reported by the answer."""

from __future__ import annotations

import asyncio
import statistics
import time

import grpc
import httpx

from bench.common import QUESTIONS, TENANT
from ragline.dev.processes import thinking_mesh
from ragline.dev.stack import LOCAL_LLM_URL, local_llm_env
from ragline.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc

PORTS = {"router": 50211, "grader": 50214, "generator": 50215, "orchestrator": 50216}
STRATEGIES = {"standard": common_pb2.STRATEGY_STANDARD, "multihop": common_pb2.STRATEGY_MULTIHOP,
              "selfrag": common_pb2.STRATEGY_SELFRAG, "auto": common_pb2.STRATEGY_AUTO}
# The orchestrator's client spans for these calls are what retrieval and reranking cost a flow.
PARTS = {"/ragline.v1.RetrievalService/Search": "retrieval", "/ragline.v1.RerankerService/Rerank": "rerank"}


def _union_ms(intervals: list[tuple[int, int]]) -> float:
    """Time covered by the intervals (µs in, ms out): concurrent model calls wait for one server, not add up."""
    total, end = 0, -1
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total / 1000


def _shares(trace: dict) -> dict[str, float]:
    processes = {pid: p["serviceName"] for pid, p in trace["processes"].items()}
    spans = trace["spans"]
    root = min(spans, key=lambda s: s["startTime"])
    total = max(s["startTime"] + s["duration"] for s in spans) - root["startTime"]
    parts: dict[str, list[tuple[int, int]]] = {"model": [], "retrieval": [], "rerank": []}
    for span in spans:
        interval = (span["startTime"], span["startTime"] + span["duration"])
        if span["operationName"].startswith("llm."):
            parts["model"].append(interval)
        elif span["operationName"] in PARTS and processes[span["processID"]] == "ragline-orchestrator":
            parts[PARTS[span["operationName"]]].append(interval)
    out = {name: _union_ms(iv) for name, iv in parts.items()}
    out["other"] = max(0.0, total / 1000 - sum(out.values()))
    out["total"] = total / 1000
    return out


async def _trace(jaeger: httpx.AsyncClient, trace_id: str) -> dict | None:
    for _ in range(20):
        resp = await jaeger.get(f"/api/traces/{trace_id}")
        if resp.status_code == 200 and resp.json().get("data"):
            data = resp.json()["data"][0]
            if any(s["operationName"].startswith("llm.") for s in data["spans"]) or len(data["spans"]) > 8:
                return data
        await asyncio.sleep(0.5)
    return None


async def model_share(per_strategy: int = 4) -> dict | None:
    """None when no local model server answers (start the stack with RAGLINE_LOCAL_LLM=server)."""
    try:
        httpx.get(f"{LOCAL_LLM_URL}/models", timeout=30).raise_for_status()
    except httpx.HTTPError:
        return None
    with thinking_mesh(PORTS, local_llm_env(), log_prefix="bench-llm"):
        return await _measure(per_strategy)


async def _measure(per_strategy: int) -> dict:
    out: dict = {"strategies": {}}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{PORTS['orchestrator']}") as channel, \
            httpx.AsyncClient(base_url="http://127.0.0.1:16686", timeout=10) as jaeger:
        stub = orchestrator_pb2_grpc.OrchestratorServiceStub(channel)
        for name, strategy in STRATEGIES.items():
            rows = []
            for question in QUESTIONS[:per_strategy]:
                query = orchestrator_pb2.FlowQuery(tenant=TENANT, query=question, strategy=strategy)
                answer = (await stub.RunFlow(orchestrator_pb2.RunFlowRequest(query=query), timeout=120)).answer
                trace = await _trace(jaeger, answer.trace_id)
                if trace is not None:
                    rows.append({**_shares(trace), "completion_tokens": answer.usage.completion_tokens,
                                 "calls": answer.llm_calls, "fallbacks": sum("the model failed" in d for d in answer.degradations)})
            if rows:
                total = sum(r["total"] for r in rows)
                out["strategies"][name] = {
                    "answers": len(rows), "p50_ms": statistics.median(r["total"] for r in rows),
                    "model_calls": statistics.mean(r["calls"] for r in rows), "fallbacks": sum(r["fallbacks"] for r in rows),
                    **{f"{part}_share": sum(r[part] for r in rows) / total for part in ("model", "retrieval", "rerank", "other")},
                    "tokens_per_s": sum(r["completion_tokens"] for r in rows) / max(1e-9, sum(r["model"] for r in rows) / 1000)}
        firsts, reported = [], []
        for question in QUESTIONS[:per_strategy]:
            query = orchestrator_pb2.FlowQuery(tenant=TENANT, query=question, strategy=common_pb2.STRATEGY_STANDARD)
            started, first = time.perf_counter(), None
            async for event in stub.RunFlowStream(orchestrator_pb2.RunFlowStreamRequest(query=query), timeout=120):
                if first is None and event.HasField("delta"):
                    first = (time.perf_counter() - started) * 1000
                if event.HasField("final"):
                    reported += [t.millis for t in event.final.timings if t.stage == "generate.first_token"]
            firsts.append(first or 0.0)
        out["first_token_ms"] = {"client_p50": statistics.median(firsts), "reported_p50": statistics.median(reported) if reported else 0.0}
    return out
