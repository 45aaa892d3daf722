"""`make bench`: the cost of the mesh, load at the gateway, where the time goes, reranker cost and memory.

Absolute times on a shared 2-core machine are for reading; ratios measured side by side are for judging.
Every load loop is bounded in count and time and targets 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import datetime as dt
import statistics
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench import quality, report, scale
from bench.inprocess import InProcessStages
from bench.stats import spread, spreads, stats
from ragline.eval.datasets import load
from ragline.eval.metrics import percentile
from ragline.loaders import RawDocument, load_files
from ragline.runtime.config import DEFAULT_PORTS
from ragline.runtime.deadlines import Budget
from ragline.stack import grpc_serving, http_ok, spawn_module, stop_process
from ragline.v1 import (
    common_pb2,
    orchestrator_pb2,
    orchestrator_pb2_grpc,
    ragline_pb2,
    ragline_pb2_grpc,
    reranker_pb2,
    reranker_pb2_grpc,
    retrieval_pb2,
    retrieval_pb2_grpc,
)
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
# Every timed figure is the median of this many runs, reported with its min–max.
ROUNDS = 3


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


async def reranker_cost(sizes: list[int], rounds: int) -> dict:
    """Reranker latency against the number of candidates (English), and for Chinese candidates the first time
    their text is seen against again (the segmentation of a passage is memoised in the service)."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{DEFAULT_PORTS['retrieval']}") as rch, \
               grpc.aio.insecure_channel(f"127.0.0.1:{DEFAULT_PORTS['reranker']}") as kch:
        search = retrieval_pb2_grpc.RetrievalServiceStub(rch).Search
        stub = reranker_pb2_grpc.RerankerServiceStub(kch)
        pool = list((await search(retrieval_pb2.SearchRequest(tenant=TENANT, query="connection pool", limit=50), timeout=30)).results)
        by_size: dict[int, list[dict]] = {}
        for _ in range(rounds):
            for size in sizes:
                cands = (pool * (size // max(1, len(pool)) + 1))[:size]
                lat, _, _ = await timed_loop(lambda c=cands: stub.Rerank(reranker_pb2.RerankRequest(
                    query="How should a connection pool be sized?", candidates=c, top_k=5), timeout=30), 1, 3, 30)
                by_size.setdefault(size, []).append(stats(lat))
        rows = [{"candidates": size, **spreads(xs, ("p50", "p95"))}
                for size, xs in by_size.items()]
        cmrc = load("squad", ROOT / "eval" / "data" / "cmrc2018" / "cmrc2018_trial.json")
        zh_query = cmrc.questions[0].text
        zh = [common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=p.id, title=p.title, text=p.text), score=1.0)
              for p in cmrc.passages[:20]]
        fresh = iter(range(10**9))

        def unseen() -> list[common_pb2.ScoredChunk]:
            round_ = next(fresh)
            return [common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=c.chunk.id, title=c.chunk.title,
                                                                  text=f"（{round_}）{c.chunk.text}"), score=1.0) for c in zh]

        chinese: dict[str, list[dict]] = {}
        for _ in range(rounds):
            for label, cands in (("first sight", None), ("seen before", zh)):
                lat, _, _ = await timed_loop(lambda c=cands: stub.Rerank(reranker_pb2.RerankRequest(
                    query=zh_query, candidates=c if c is not None else unseen(), top_k=5), timeout=30), 1, 3, 15)
                chinese.setdefault(label, []).append(stats(lat))
    return {"rows": rows, "chinese_20": {label: spreads(xs, ("p50", "p95"))
                                         for label, xs in chinese.items()}}


async def peak_memory(peaks: dict[str, float], every_s: float = 0.5) -> None:
    """The highest resident memory of each process seen while this task runs (cancel it to stop)."""
    while True:
        for name, mib in memory().items():
            peaks[name] = max(peaks.get(name, 0.0), mib)
        await asyncio.sleep(every_s)


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
    return {name: spread(v) for name, v in p50s.items()}


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
    r: dict = {"mem_idle": memory(), "rounds": ROUNDS}
    print("1/6 the cost of the mesh: no-op RPCs, mesh against in-process, tracing", flush=True)
    r["noop"] = await noop_rpcs(ROUNDS)
    r["mesh"] = await mesh_vs_inprocess(ROUNDS)
    r["tracing"] = await tracing_overhead(ROUNDS)
    print("2/6 load at the gateway (HTTP per strategy, gRPC)", flush=True)
    sampler = asyncio.create_task(peak_memory(r.setdefault("mem_load", {})))
    r["load"] = await gateway_load({"standard": [1, 2, 4, 8, 16], "multihop": [1, 4, 16], "selfrag": [1, 4, 16],
                                    "auto": [1, 4, 16]}, 3, ROUNDS)
    sampler.cancel()
    print("3/6 where the time goes, checked against Jaeger", flush=True)
    r["strategies"] = await per_strategy(2, 4, sample=5, rounds=ROUNDS)
    print("4/6 how cost grows: reranker, Weaviate at 1k/10k/100k chunks, ingestion", flush=True)
    r["rerank"] = await reranker_cost([5, 10, 20, 50], ROUNDS)
    r["scale"] = await scale.measure()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{DEFAULT_PORTS['retrieval']}") as ch:
        r["ingest"] = await scale.service_ingest(retrieval_pb2_grpc.RetrievalServiceStub(ch))
    print("5/6 adaptive against fixed strategies, hops, reranker input length", flush=True)
    r["quality"] = await quality.measure()
    r["seconds"] = time.monotonic() - t0
    out = ROOT / "bench" / "results"
    figures = report.plot(r, out / stamp)
    path = out / f"{stamp}.md"
    path.write_text(report.markdown(r, stamp, figures), encoding="utf-8")
    print(f"\n6/6 wrote {path.relative_to(ROOT)}\n")
    print(report.headline(r))


if __name__ == "__main__":
    asyncio.run(main())
