"""`make bench`: the cost of the mesh, load at the gateway, where the time goes, reranker cost and memory.

Absolute times on a shared 2-core machine are for reading; ratios measured side by side are for judging.
Every load loop is bounded in count and time and targets 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import statistics
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.inprocess import InProcessStages
from ragline.eval.metrics import percentile
from ragline.loaders import RawDocument, load_files
from ragline.runtime.config import DEFAULT_PORTS
from ragline.runtime.deadlines import Budget
from ragline.stack import grpc_serving, http_ok, spawn_module, stop_process
from ragline.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc, reranker_pb2, reranker_pb2_grpc, retrieval_pb2, retrieval_pb2_grpc
from services.orchestrator.config import OrchestratorSettings
from services.orchestrator.flows import FlowRunner

ROOT = Path(__file__).resolve().parent.parent
TENANT = "bench"
QUESTIONS = [
    "What is the default maximumPoolSize of HikariCP?",
    "What is the default connectionTimeout of HikariCP?",
    "How should a connection pool be sized?",
    "What causes pool exhaustion?",
    "CrashLoopBackOff 的重启退避上限是多少？",
    "Redis 宕机时支付服务会怎样？",
    "Why did checkout latency rise in March 2024?",
    "Which probe should check the database?",
]
STRATEGIES = ["standard", "multihop", "selfrag", "auto"]
API_KEY = "bench-key"
# A gateway of the benchmark's own, so that the rate limit and the answer cache of `make up`'s do not shape the figures.
BENCH_HTTP_PORT = 8100
BENCH_GRPC_PORT = 50200


def stats(ms: list[float]) -> dict[str, float]:
    return {"p50": percentile(ms, 50), "p95": percentile(ms, 95), "p99": percentile(ms, 99), "n": len(ms)}


async def timed_loop(call: Callable[[], Awaitable[object]], concurrency: int, seconds: float, max_calls: int) -> tuple[list[float], int, float]:
    """Run call() from `concurrency` workers until the time or the call count is used up."""
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    started = time.monotonic()

    async def worker() -> None:
        nonlocal errors
        while time.monotonic() < deadline and len(latencies) + errors < max_calls:
            t0 = time.perf_counter()
            try:
                await call()
                latencies.append((time.perf_counter() - t0) * 1000)
            except Exception:
                errors += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, errors, time.monotonic() - started


async def ingest_corpus() -> None:
    docs = [d for d in load_files(ROOT / "examples" / "corpus") if isinstance(d, RawDocument)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{DEFAULT_PORTS['retrieval']}") as ch:
        await retrieval_pb2_grpc.RetrievalServiceStub(ch).Ingest(retrieval_pb2.IngestRequest(tenant=TENANT, documents=[
            retrieval_pb2.Document(id=d.id, title=d.title, text=d.text, source=d.source) for d in docs]), timeout=600)


async def noop_rpcs() -> list[dict]:
    rows = []
    for service, port in DEFAULT_PORTS.items():
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            req = health_pb2.HealthCheckRequest()
            def check(stub: health_pb2_grpc.HealthStub = stub, req: health_pb2.HealthCheckRequest = req) -> Awaitable[object]:
                return stub.Check(req, timeout=5)

            seq, _, _ = await timed_loop(check, 1, 5, 300)
            conc, _, elapsed = await timed_loop(check, 16, 3, 5000)
            rows.append({"service": service, **stats(seq), "calls_per_s_1": len(seq) / (sum(seq) / 1000),
                         "calls_per_s_16": len(conc) / elapsed})
    return rows


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

    def med(name: str, key: str) -> tuple[float, float, float]:
        values = [r[key] for r in results[name]]
        return statistics.median(values), min(values), max(values)

    return {side: {k: med(side, k) for k in ("p50", "p95", "qps_4")} for side in results}


async def gateway_load(levels: list[int], seconds: float) -> list[dict]:
    rows = []
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{BENCH_HTTP_PORT}", headers=headers, timeout=30) as client:
        counter = iter(range(10**9))

        async def call() -> None:
            q = QUESTIONS[next(counter) % len(QUESTIONS)]
            resp = await client.post("/v1/answer", json={"query": q, "strategy": "standard"})
            resp.raise_for_status()

        for level in levels:
            lat, errors, elapsed = await timed_loop(call, level, seconds, 2000)
            rows.append({"concurrency": level, "qps": len(lat) / elapsed, **stats(lat),
                         "error_rate": errors / max(1, errors + len(lat))})
    return rows


async def per_strategy(concurrency: int, seconds: float) -> dict[str, dict]:
    out: dict[str, dict] = {}
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{BENCH_HTTP_PORT}", headers=headers, timeout=60) as client:
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
            out[strategy] = {**stats(lat), "errors": errors, "stage_calls": statistics.mean(calls) if calls else 0,
                             "stages_ms": {k: sum(v) / n for k, v in sorted(timings.items())}}
    return out


async def reranker_cost(sizes: list[int]) -> list[dict]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{DEFAULT_PORTS['retrieval']}") as rch, \
               grpc.aio.insecure_channel(f"127.0.0.1:{DEFAULT_PORTS['reranker']}") as kch:
        found = await retrieval_pb2_grpc.RetrievalServiceStub(rch).Search(
            retrieval_pb2.SearchRequest(tenant=TENANT, query="connection pool", limit=50), timeout=30)
        pool = list(found.results)
        stub = reranker_pb2_grpc.RerankerServiceStub(kch)
        rows = []
        for size in sizes:
            cands = (pool * (size // max(1, len(pool)) + 1))[:size]
            lat, _, _ = await timed_loop(lambda c=cands: stub.Rerank(reranker_pb2.RerankRequest(
                query="How should a connection pool be sized?", candidates=c, top_k=5), timeout=30), 1, 5, 50)
            rows.append({"candidates": size, **stats(lat)})
    return rows


def memory() -> dict[str, float]:
    out = {}
    for pid_file in sorted((ROOT / ".run" / "pids").glob("*.pid")):
        pid = pid_file.read_text().split()[0]
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        out[pid_file.stem] = rss_kb / 1024
    return out


def plot(load_rows: list[dict], rerank_rows: list[dict], folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    fig, ax1 = plt.subplots(figsize=(6, 3.5))
    levels = [r["concurrency"] for r in load_rows]
    ax1.plot(levels, [r["qps"] for r in load_rows], "o-", label="queries/s")
    ax1.set_xlabel("concurrent clients")
    ax1.set_ylabel("queries/s")
    ax2 = ax1.twinx()
    ax2.plot(levels, [r["p95"] for r in load_rows], "s--", color="tab:red", label="p95 ms")
    ax2.set_ylabel("p95 latency (ms)")
    ax1.set_title("standard flow at the gateway (HTTP)")
    fig.tight_layout()
    fig.savefig(folder / "gateway_load.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["candidates"] for r in rerank_rows], [r["p50"] for r in rerank_rows], "o-")
    ax.set_xlabel("candidates")
    ax.set_ylabel("p50 latency (ms)")
    ax.set_title("reranker latency against candidates")
    fig.tight_layout()
    fig.savefig(folder / "reranker.png", dpi=110)
    plt.close(fig)
    return ["gateway_load.png", "reranker.png"]


def report(r: dict, stamp: str, figures: list[str]) -> str:
    lines = [f"# ragline benchmark {stamp}", "", f"Machine: {os.cpu_count()} cores. Medians of several runs; "
             "ranges are min–max over runs. Absolute times are for reading, ratios for judging.", ""]
    lines += ["## 1. The cost of the mesh", "", "No-op RPC (gRPC health check) through each service's real server:", "",
              "| service | p50 ms | p99 ms | calls/s (1 conn, sequential) | calls/s (16 concurrent) |", "|---|---|---|---|---|"]
    lines += [f"| {x['service']} | {x['p50']:.2f} | {x['p99']:.2f} | {x['calls_per_s_1']:.0f} | {x['calls_per_s_16']:.0f} |"
              for x in r["noop"]]
    m, p = r["mesh"]["mesh"], r["mesh"]["in-process"]
    lines += ["", "Standard flow through the mesh against the same stage logic composed in one process:", "",
              "| | p50 ms | p95 ms | queries/s at 4 concurrent |", "|---|---|---|---|"]
    for name, side in (("mesh", m), ("in-process", p)):
        lines.append(f"| {name} | {side['p50'][0]:.1f} ({side['p50'][1]:.1f}–{side['p50'][2]:.1f}) | "
                     f"{side['p95'][0]:.1f} ({side['p95'][1]:.1f}–{side['p95'][2]:.1f}) | "
                     f"{side['qps_4'][0]:.1f} ({side['qps_4'][1]:.1f}–{side['qps_4'][2]:.1f}) |")
    lines += ["", f"Ratios mesh / in-process: p50 **{m['p50'][0] / p['p50'][0]:.2f}×**, p95 **{m['p95'][0] / p['p95'][0]:.2f}×**, "
              f"throughput **{m['qps_4'][0] / p['qps_4'][0]:.2f}×**.", ""]
    t = r["tracing"]
    off = t["off (0%)"][0]
    lines += ["Tracing overhead, standard flow (p50 ms, median of rounds; ratio to tracing off):", "",
              "| tracing | p50 ms | ratio |", "|---|---|---|"]
    lines += [f"| {name} | {v[0]:.1f} ({v[1]:.1f}–{v[2]:.1f}) | {v[0] / off:.2f}× |" for name, v in t.items()]
    lines += [""]
    lines += ["## 2. Load at the gateway (HTTP, standard flow, no answer cache, no rate limit)", "",
              "| concurrency | queries/s | p50 ms | p95 ms | p99 ms | error rate |", "|---|---|---|---|---|---|"]
    lines += [f"| {x['concurrency']} | {x['qps']:.1f} | {x['p50']:.0f} | {x['p95']:.0f} | {x['p99']:.0f} | {x['error_rate']:.3f} |"
              for x in r["load"]]
    lines += ["", f"![gateway load]({stamp}/{figures[0]})", ""]
    lines += ["## 3. Where the time goes, per strategy (concurrency 2)", "",
              "| strategy | p50 ms | p95 ms | stage calls | mean ms per stage |", "|---|---|---|---|---|"]
    for name, x in r["strategies"].items():
        stages = ", ".join(f"{k} {v:.0f}" for k, v in x["stages_ms"].items())
        lines.append(f"| {name} | {x['p50']:.0f} | {x['p95']:.0f} | {x['stage_calls']:.1f} | {stages} |")
    lines += ["", "## 4. Reranker latency against candidates", "", "| candidates | p50 ms | p95 ms |", "|---|---|---|"]
    lines += [f"| {x['candidates']} | {x['p50']:.1f} | {x['p95']:.1f} |" for x in r["rerank"]]
    lines += ["", f"![reranker]({stamp}/{figures[1]})", "", "## 5. Resident memory (MiB)", "",
              "| process | idle | after load |", "|---|---|---|"]
    lines += [f"| {k} | {v:.0f} | {r['mem_after'].get(k, 0):.0f} |" for k, v in r["mem_idle"].items()]
    lines += ["", f"Total run time: {r['seconds']:.0f} s."]
    return "\n".join(lines) + "\n"


def start_gateway() -> subprocess.Popen[bytes]:
    return spawn_module("gateway", {
        "RAGLINE_API_KEYS": f"{API_KEY}:{TENANT}", "RAGLINE_GATEWAY_PORT": str(BENCH_GRPC_PORT),
        "RAGLINE_GATEWAY_HTTP_PORT": str(BENCH_HTTP_PORT), "RAGLINE_GATEWAY_RATE_LIMIT_PER_S": "1000000",
        "RAGLINE_GATEWAY_RATE_LIMIT_BURST": "1000000", "RAGLINE_GATEWAY_CACHE_ENABLED": "false",
    }, http_ok(f"http://127.0.0.1:{BENCH_HTTP_PORT}/readyz"), "bench-gateway")


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
    return {name: (statistics.median(v), min(v), max(v)) for name, v in p50s.items()}


async def main() -> None:
    t0 = time.monotonic()
    gateway = start_gateway()
    try:
        await measure(t0)
    finally:
        stop_process(gateway)


async def measure(t0: float) -> None:
    stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M")
    print("ingesting the sample corpus into tenant 'bench'", flush=True)
    await ingest_corpus()
    r: dict = {"mem_idle": memory()}
    print("1/5 no-op RPCs", flush=True)
    r["noop"] = await noop_rpcs()
    print("1/5 mesh against in-process", flush=True)
    r["mesh"] = await mesh_vs_inprocess()
    print("2/5 gateway load", flush=True)
    r["load"] = await gateway_load([1, 2, 4, 8, 16], 8)
    print("3/5 per-strategy breakdown", flush=True)
    r["strategies"] = await per_strategy(2, 8)
    print("1/5 tracing overhead", flush=True)
    r["tracing"] = await tracing_overhead()
    print("4/5 reranker cost", flush=True)
    r["rerank"] = await reranker_cost([5, 10, 20, 50])
    r["mem_after"] = memory()
    r["seconds"] = time.monotonic() - t0
    out = ROOT / "bench" / "results"
    figures = plot(r["load"], r["rerank"], out / stamp)
    path = out / f"{stamp}.md"
    path.write_text(report(r, stamp, figures), encoding="utf-8")
    m, p = r["mesh"]["mesh"], r["mesh"]["in-process"]
    print(f"\nwrote {path.relative_to(ROOT)}")
    print(f"mesh/in-process: p50 {m['p50'][0] / p['p50'][0]:.2f}x, p95 {m['p95'][0] / p['p95'][0]:.2f}x, "
          f"throughput {m['qps_4'][0] / p['qps_4'][0]:.2f}x")
    best = max(r["load"], key=lambda x: x["qps"])
    print(f"gateway saturation: {best['qps']:.1f} queries/s at concurrency {best['concurrency']}")
    print("p95 per strategy: " + ", ".join(f"{k} {v['p95']:.0f} ms" for k, v in r["strategies"].items()))
    print("tracing p50 vs off: " + ", ".join(f"{k} {v[0] / r['tracing']['off (0%)'][0]:.2f}x" for k, v in r["tracing"].items()))
    print(f"reranker, 20 candidates: p50 {next(x['p50'] for x in r['rerank'] if x['candidates'] == 20):.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
