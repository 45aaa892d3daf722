"""The cost of the mesh: no-op RPCs per service, the standard flow through the mesh against the same stage logic
in one process, and the cost of tracing."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.common import QUESTIONS, TENANT, stack_pids, timed_loop
from bench.inprocess import InProcessStages
from bench.stats import spread, spreads, stats
from ragline.dev.processes import grpc_serving, spawn_module, stop_process
from ragline.eval.metrics import percentile
from ragline.runtime.config import DEFAULT_PORTS
from ragline.runtime.deadlines import Budget
from ragline.v1 import (
    common_pb2,
    orchestrator_pb2,
    orchestrator_pb2_grpc,
)
from services.orchestrator.config import OrchestratorSettings
from services.orchestrator.flows import FlowRunner


async def noop_rpcs(rounds: int) -> list[dict]:
    runs: dict[str, list[dict]] = {}
    for _ in range(rounds):
        for service, port in DEFAULT_PORTS.items():
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                stub = health_pb2_grpc.HealthStub(ch)
                req = health_pb2.HealthCheckRequest()

                def check(stub: health_pb2_grpc.HealthStub = stub, req: health_pb2.HealthCheckRequest = req) -> Awaitable[object]:
                    return stub.Check(req, timeout=5)

                seq, _, _ = await timed_loop(check, 1, 2, 200)
                conc, _, elapsed = await timed_loop(check, 16, 1.5, 3000)
                runs.setdefault(service, []).append({**stats(seq), "calls_per_s_1": len(seq) / (sum(seq) / 1000),
                                                     "calls_per_s_16": len(conc) / elapsed})
    return [{"service": service, **spreads(rs, ("p50", "p99", "calls_per_s_1", "calls_per_s_16"))}
            for service, rs in runs.items()]


async def mesh_vs_inprocess(rounds: int = 3) -> dict:
    inproc = await InProcessStages.create()
    runner = FlowRunner(inproc, OrchestratorSettings())
    results: dict[str, list[dict]] = {"mesh": [], "in-process": []}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{DEFAULT_PORTS['orchestrator']}") as ch:
        stub = orchestrator_pb2_grpc.OrchestratorServiceStub(ch)
        counter = iter(range(10**9))

        def query() -> orchestrator_pb2.FlowQuery:
            return orchestrator_pb2.FlowQuery(tenant=TENANT, query=QUESTIONS[next(counter) % len(QUESTIONS)],
                                              strategy=common_pb2.STRATEGY_STANDARD)

        sides = {
            "mesh": lambda: stub.RunFlow(orchestrator_pb2.RunFlowRequest(query=query()), timeout=30),
            "in-process": lambda: runner.run(query(), Budget(30)),
        }
        for _ in range(rounds):
            for name, call in sides.items():  # alternate sides so drift on the machine hits both
                seq, _, _ = await timed_loop(call, 1, 20, 40)
                conc, errs, elapsed = await timed_loop(call, 4, 10, 200)
                results[name].append({**stats(seq), "qps_4": len(conc) / elapsed, "errors": errs})
    await inproc.close()

    return {side: spreads(rs, ("p50", "p95", "qps_4")) for side, rs in results.items()}


def cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) so far of every process `make up` started, and of this one ("bench")."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for name, pid in stack_pids().items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = (int(fields[11]) + int(fields[12])) / tick
    own = os.times()
    return out | {"bench": own.user + own.system}


async def cpu_per_request(rounds: int = 3, requests: int = 200) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Where the mesh's time goes: the CPU milliseconds each process spends on one standard answer, asked one at a
    time through the mesh and through the same logic in this process, alternating. On 2 cores a sequential answer's
    CPU is most of its latency, so the mesh's extra CPU is what its hops cost."""
    inproc = await InProcessStages.create()
    runner = FlowRunner(inproc, OrchestratorSettings())
    runs: dict[str, list[dict[str, float]]] = {"mesh": [], "in-process": []}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{DEFAULT_PORTS['orchestrator']}") as ch:
        stub = orchestrator_pb2_grpc.OrchestratorServiceStub(ch)

        def query(i: int) -> orchestrator_pb2.FlowQuery:
            return orchestrator_pb2.FlowQuery(tenant=TENANT, query=QUESTIONS[i % len(QUESTIONS)], strategy=common_pb2.STRATEGY_STANDARD)

        sides = {"mesh": lambda i: stub.RunFlow(orchestrator_pb2.RunFlowRequest(query=query(i)), timeout=30),
                 "in-process": lambda i: runner.run(query(i), Budget(30))}
        for call in sides.values():  # warm: caches, connections, the first calls
            for i in range(20):
                await call(i)
        for _ in range(rounds):
            for side, call in sides.items():
                before, started = cpu_seconds(), time.perf_counter()
                for i in range(requests):
                    await call(i)
                wall = (time.perf_counter() - started) / requests * 1000
                after = cpu_seconds()
                ms = {name: (after[name] - before.get(name, after[name])) / requests * 1000 for name in after}
                runs[side].append({"wall": wall, "total": sum(ms.values()), **ms})
    await inproc.close()
    return {side: {k: spread([r.get(k, 0.0) for r in rs]) for k in rs[0]} for side, rs in runs.items()}


async def tracing_overhead(rounds: int = 3) -> dict[str, tuple[float, float, float]]:
    """The standard flow through orchestrators that sample every trace, one in ten, or none (the stages
    follow the orchestrator's decision), measured in alternation."""
    ratios = {"sampled 100%": "1.0", "sampled 10%": "0.1", "off (0%)": "0.0"}
    procs, stubs, channels = {}, {}, []
    for i, (name, ratio) in enumerate(ratios.items()):
        port = 50210 + i
        procs[name] = spawn_module("services.orchestrator", {
            "RAGLINE_ORCHESTRATOR_PORT": str(port), "RAGLINE_TRACE_SAMPLE_RATIO": ratio}, grpc_serving(port),
            f"bench-orchestrator-{ratio}")
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        channels.append(channel)
        stubs[name] = orchestrator_pb2_grpc.OrchestratorServiceStub(channel)
    p50s: dict[str, list[float]] = {name: [] for name in ratios}
    try:
        counter = iter(range(10**9))
        for _ in range(rounds):
            for name, stub in stubs.items():
                def call(stub: orchestrator_pb2_grpc.OrchestratorServiceStub = stub) -> Awaitable[object]:
                    query = orchestrator_pb2.FlowQuery(tenant=TENANT, query=QUESTIONS[next(counter) % len(QUESTIONS)],
                                                       strategy=common_pb2.STRATEGY_STANDARD)
                    return stub.RunFlow(orchestrator_pb2.RunFlowRequest(query=query), timeout=30)

                lat, _, _ = await timed_loop(call, 1, 10, 30)
                p50s[name].append(percentile(lat, 50))
    finally:
        for channel in channels:
            await channel.close()
        for proc in procs.values():
            stop_process(proc)
    return {name: spread(v) for name, v in p50s.items()}
