"""`make chaos`: a fault drill under steady load; `make soak`: 20,000 mixed requests and every process's memory.

Both need the mesh (`make up`), use the benchmark's own gateway (no answer cache, no rate limit in the way) and
stay on 127.0.0.1, bounded in count and time. The drill applies each fault of FAULTS to `make up`'s own processes
while HTTP and gRPC clients ask the sample corpus's questions with 3 s deadlines, and reports for each fault what
the clients got and how long after the component served again the mesh answered as before."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import os
import signal
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc
import httpx
import redis

from bench.common import API_KEY, BENCH_GRPC_PORT, BENCH_HTTP_PORT, QUESTIONS, ROOT, ingest_corpus, memory, start_gateway
from ragline.dev import stack
from ragline.dev.processes import grpc_serving, port_open, spawn_module, stop_process
from ragline.runtime.config import DEFAULT_PORTS
from ragline.v1 import common_pb2, ragline_pb2, ragline_pb2_grpc, reranker_pb2, reranker_pb2_grpc, retrieval_pb2, retrieval_pb2_grpc

DEADLINE_MS = 3000
LATE_MS = DEADLINE_MS + 100
HTTP_STRATEGIES = ("standard", "auto", "multihop", "selfrag")
GRPC_STRATEGIES = ("standard", "auto")
# Answers that are a documented error: the gateway's own error codes for a stage down, a deadline and saturation.
DOCUMENTED_ERRORS = {"http 429", "http 503", "http 504", "grpc UNAVAILABLE", "grpc DEADLINE_EXCEEDED",
                     "grpc RESOURCE_EXHAUSTED"}
HOLD_S = 6.0
RECOVERY_TARGET_S = 5.0
RECOVERY_WAIT_S = 30.0
STEADY_S = 3.0
# A drill's slow stage waits longer than any request's deadline; its flooded stage admits this many calls at once.
SLOW_MS = 5000
FLOOD_LIMIT = 4
FLOOD_CLIENTS = 24
JAEGER = "http://127.0.0.1:16686"
REDIS_URL = "redis://127.0.0.1:6379/0"
# Jaeger's local store keeps the last max_traces traces in memory (deploy/jaeger/config.yaml): it grows with the
# traces it holds, so the soak reports it without holding it to the 10 % of a service.
GROWS_BY_DESIGN = {"jaeger"}
STAGES = ("router", "retrieval", "reranker", "grader", "generator")


# What a client got: the status, the degradations named, the documents cited and the trace id.
Reply = tuple[str, tuple[str, ...], tuple[str, ...], str]


@dataclass(frozen=True)
class Outcome:
    started: float
    ended: float
    transport: str
    strategy: str
    query: str
    status: str  # "http 200", "grpc OK", "grpc UNAVAILABLE", "client ReadTimeout", ...
    degradations: tuple[str, ...] = ()
    documents: tuple[str, ...] = ()
    trace_id: str = ""

    @property
    def ms(self) -> float:
        return (self.ended - self.started) * 1000

    @property
    def answered(self) -> bool:
        return self.status in ("http 200", "grpc OK")


@dataclass(frozen=True)
class Fault:
    kind: str  # kill | slow | errors | flood
    component: str

    @property
    def name(self) -> str:
        return f"{self.kind} {self.component}"

    @property
    def env(self) -> dict[str, str]:
        return {"slow": {"RAGLINE_FAULT_DELAY_MS": str(SLOW_MS)}, "errors": {"RAGLINE_FAULT_ERROR_RATE": "1"},
                "flood": {"RAGLINE_MAX_CONCURRENT_RPCS": str(FLOOD_LIMIT)}}.get(self.kind, {})


FAULTS = [
    *(Fault("kill", c) for c in (*STAGES, "orchestrator", "weaviate", "redis", "jaeger")),
    *(Fault("slow", c) for c in STAGES),
    *(Fault("errors", c) for c in STAGES),
    Fault("flood", "reranker"), Fault("flood", "retrieval"),
    *(Fault("kill one of two", c) for c in ("reranker", "generator")),
]
# The second replica of a stage in the "kill one of two" faults: its gRPC port is the stage's + 200, its metrics
# port (to see it take calls again) 9600 + the stage's last digit.
REPLICA_PORT_OFFSET = 200


class Load:
    """Closed-loop clients over HTTP (one per strategy) and gRPC, each with the drill's deadline, recording every
    outcome with its times."""

    def __init__(self) -> None:
        self.outcomes: list[Outcome] = []
        self.stopped = asyncio.Event()
        self.limit = 10**9

    async def run(self) -> None:
        headers = {"Authorization": f"Bearer {API_KEY}", "X-Request-Timeout-Ms": str(DEADLINE_MS)}
        # The client waits well past the deadline, so that a request the mesh lets run over is seen, not cut.
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{BENCH_HTTP_PORT}", headers=headers,
                                     timeout=DEADLINE_MS / 1000 + 5) as client, \
                grpc.aio.insecure_channel(f"127.0.0.1:{BENCH_GRPC_PORT}") as channel:
            stub = ragline_pb2_grpc.RaglineServiceStub(channel)
            workers = [self._client("http", s, i, self._http(client, s)) for i, s in enumerate(HTTP_STRATEGIES)]
            workers += [self._client("grpc", s, i, self._grpc(stub, s)) for i, s in enumerate(GRPC_STRATEGIES)]
            await asyncio.gather(*workers)

    def _more(self) -> bool:
        return not self.stopped.is_set() and len(self.outcomes) < self.limit

    async def _client(self, transport: str, strategy: str, offset: int, ask: Callable[[str], Awaitable[Reply]]) -> None:
        """One closed-loop client: ask, record, and back off a little after an error, as real clients do."""
        n = offset
        while self._more():
            query = QUESTIONS[n % len(QUESTIONS)]
            n += 1
            started = time.monotonic()
            status, degradations, documents, trace_id = await ask(query)
            self.outcomes.append(Outcome(started, time.monotonic(), transport, strategy, query, status, degradations,
                                         documents, trace_id))
            if status not in ("http 200", "grpc OK"):
                await asyncio.sleep(0.05)

    @staticmethod
    def _http(client: httpx.AsyncClient, strategy: str) -> Callable[[str], Awaitable[Reply]]:
        async def ask(query: str) -> Reply:
            try:
                resp = await client.post("/v1/answer", json={"query": query, "strategy": strategy})
            except httpx.HTTPError as exc:
                return f"client {type(exc).__name__}", (), (), ""
            body = resp.json() if resp.status_code == 200 else {}
            return (f"http {resp.status_code}", tuple(body.get("degradations", ())),
                    tuple(sorted({c["document_id"] for c in body.get("citations", ())})), body.get("trace_id", ""))
        return ask

    @staticmethod
    def _grpc(stub: ragline_pb2_grpc.RaglineServiceStub, strategy: str) -> Callable[[str], Awaitable[Reply]]:
        enum = common_pb2.Strategy.Value(f"STRATEGY_{strategy.upper()}")

        async def ask(query: str) -> Reply:
            try:
                reply = await stub.Answer(ragline_pb2.AnswerRequest(query=query, strategy=enum), timeout=DEADLINE_MS / 1000,
                                          metadata=(("authorization", f"Bearer {API_KEY}"),))
            except grpc.aio.AioRpcError as exc:
                return f"grpc {exc.code().name}", (), (), ""
            answer = reply.answer
            return ("grpc OK", tuple(answer.degradations), tuple(sorted({c.document_id for c in answer.citations})),
                    answer.trace_id)
        return ask


def verdict(o: Outcome, expected: dict[tuple[str, str], tuple[str, ...]]) -> str:
    """correct (what the mesh answers without faults), degraded (and named), a documented error, or wrong."""
    if o.answered:
        if o.degradations:
            return "degraded"
        return "correct" if o.documents == expected[(o.strategy, o.query)] else "wrong"
    return "error" if o.status in DOCUMENTED_ERRORS else "wrong"


async def expected_answers() -> dict[tuple[str, str], tuple[str, ...]]:
    """Each question's cited documents without any fault, asked one at a time; the mesh must be clean to start."""
    out = {}
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{BENCH_HTTP_PORT}", headers=headers, timeout=30) as client:
        for strategy in {*HTTP_STRATEGIES, *GRPC_STRATEGIES}:
            for query in QUESTIONS:
                resp = await client.post("/v1/answer", json={"query": query, "strategy": strategy})
                body = resp.json()
                if resp.status_code != 200 or body["degradations"]:
                    raise SystemExit(f"the mesh is not healthy before the drill: {strategy} {query!r} -> "
                                     f"{resp.status_code} {body.get('degradations', body)}")
                out[(strategy, query)] = tuple(sorted({c["document_id"] for c in body["citations"]}))
    return out


def component(name: str) -> stack.Component:
    return next(c for c in stack.components() if c.name == name)


def kill(comp: stack.Component) -> None:
    pid = stack.running_pid(comp)
    if pid is None:
        raise SystemExit(f"{comp.name} is not running: start the mesh with `make up`")
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(port_open(p) for p in comp.ports):
        time.sleep(0.05)
    try:
        os.waitpid(pid, os.WNOHANG)  # a process this drill started is its child: reap it
    except ChildProcessError:
        pass


async def start(comp: stack.Component) -> float:
    """Start comp (as `make up` would) and return the moment it was first seen ready."""
    await asyncio.to_thread(stack.start, comp)
    return time.monotonic()


async def flood(comp_name: str, until: asyncio.Event) -> Counter[str]:
    """Direct calls to one stage from FLOOD_CLIENTS clients at once, past its limit, until told to stop."""
    codes: Counter[str] = Counter()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{DEFAULT_PORTS[comp_name]}") as channel:
        if comp_name == "reranker":
            chunks = [common_pb2.ScoredChunk(chunk=common_pb2.Chunk(id=f"c{i}", title="pool", text=q)) for i, q in enumerate(QUESTIONS)]
            rpc = reranker_pb2_grpc.RerankerServiceStub(channel).Rerank
            request = reranker_pb2.RerankRequest(query="connection pool size", candidates=chunks)
        else:
            rpc = retrieval_pb2_grpc.RetrievalServiceStub(channel).Search
            request = retrieval_pb2.SearchRequest(tenant="bench", query="connection pool size")

        async def client() -> None:
            while not until.is_set():
                try:
                    await rpc(request, timeout=2)
                    codes["OK"] += 1
                except grpc.aio.AioRpcError as exc:
                    codes[exc.code().name] += 1
                    await asyncio.sleep(0.01)

        await asyncio.gather(*(client() for _ in range(FLOOD_CLIENTS)))
    return codes


async def recovered_at(fault: Fault, back: float, load: Load, expected: dict) -> float | None:
    """When the mesh first did again what the component does, after it was back (None: not within the wait)."""
    limit = back + RECOVERY_WAIT_S
    if fault.component == "redis":
        # The gateway's rate limit writes a bucket to Redis on every request again (Redis starts empty).
        client = redis.Redis.from_url(REDIS_URL, socket_timeout=0.2)
        while time.monotonic() < limit:
            try:
                if client.keys("ragline:rate:*"):
                    return time.monotonic()
            except redis.RedisError:
                pass
            await asyncio.sleep(0.05)
        return None
    if fault.component == "jaeger":
        # The first answer asked after Jaeger was back whose trace Jaeger then holds.
        async with httpx.AsyncClient(base_url=JAEGER, timeout=5) as jaeger:
            checked: set[str] = set()
            while time.monotonic() < limit:
                await asyncio.sleep(1.0)
                for o in [o for o in load.outcomes if o.started >= back and o.trace_id and o.trace_id not in checked][:20]:
                    checked.add(o.trace_id)
                    resp = await jaeger.get(f"/api/traces/{o.trace_id}")
                    if resp.status_code == 200 and resp.json().get("data"):
                        earlier = [p for p in load.outcomes if back <= p.started < o.started and p.trace_id not in checked]
                        if not earlier:
                            return o.ended
        return None
    # Answers as before: from the end of the last answer (asked after the component was back) that was not, every
    # client has had correct answers for STEADY_S, so that strategies that never call the component cannot hide it.
    clients = {*(("http", s) for s in HTTP_STRATEGIES), *(("grpc", s) for s in GRPC_STRATEGIES)}
    while time.monotonic() < limit:
        after = [o for o in load.outcomes if o.started >= back]
        since = max((o.ended for o in after if verdict(o, expected) != "correct"), default=back)
        steady = [o for o in after if o.started >= since]
        if steady and steady[-1].ended - since >= STEADY_S and {(o.transport, o.strategy) for o in steady} >= clients:
            return since
        await asyncio.sleep(0.1)
    return None


async def settle(load: Load, expected: dict, seconds: float = 20) -> None:
    """Wait until the last answers of every client are clean again, so that one fault does not bleed into the next."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        recent = load.outcomes[-12:]
        if len(recent) == 12 and all(verdict(o, expected) == "correct" for o in recent):
            return
        await asyncio.sleep(0.2)


async def apply(fault: Fault, load: Load, expected: dict) -> dict:
    comp = component(fault.component)
    await settle(load, expected)
    began = time.monotonic()
    flood_codes: Counter[str] = Counter()
    if fault.kind == "kill one of two":
        return await kill_one_replica(fault, load, expected)
    if fault.kind == "kill":
        await asyncio.to_thread(kill, comp)
        await asyncio.sleep(HOLD_S)
    else:
        # A rolling replacement with the faulty settings, held, then the normal process again.
        await asyncio.to_thread(kill, comp)
        await start(dataclasses.replace(comp, env={**comp.env, **fault.env}))
        if fault.kind == "flood":
            stop_flood = asyncio.Event()
            flooding = asyncio.create_task(flood(fault.component, stop_flood))
            await asyncio.sleep(HOLD_S)
            stop_flood.set()
            flood_codes = await flooding
        else:
            await asyncio.sleep(HOLD_S)
        await asyncio.to_thread(kill, comp)
    back = await start(comp)
    recovered = await recovered_at(fault, back, load, expected)
    ended = time.monotonic()
    window = [o for o in load.outcomes if began <= o.started < ended]
    return summarize(fault.name, window, expected) | {
        "recovery_s": None if recovered is None else max(0.0, recovered - back), "flood": dict(flood_codes)}


def handled_ok(metrics_port: int, method: str) -> float:
    """Calls of `method` a process has answered OK, from its /metrics (0 while it cannot be reached)."""
    try:
        text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=1).text
    except httpx.HTTPError:
        return 0.0
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("ragline_grpc_server_handled_total{") and 'code="OK"' in line and f'method="{method}"' in line)


async def kill_one_replica(fault: Fault, load: Load, expected: dict) -> dict:
    """Two replicas of a stage behind the orchestrator (round-robin); one is killed and started again. The other
    keeps answering meanwhile; recovery is the moment the restarted one answers calls again."""
    stage, method = fault.component, {"reranker": "Rerank", "generator": "Generate"}[fault.component]
    port, metrics_port = DEFAULT_PORTS[stage] + REPLICA_PORT_OFFSET, 9600 + DEFAULT_PORTS[stage] % 10
    env = {f"RAGLINE_{stage.upper()}_PORT": str(port), "RAGLINE_METRICS_PORT": str(metrics_port)}

    def replica() -> subprocess.Popen[bytes]:
        return spawn_module(f"services.{stage}", env, grpc_serving(port), f"chaos-{stage}-replica")

    orchestrator = component("orchestrator")
    second = await asyncio.to_thread(replica)
    await asyncio.to_thread(kill, orchestrator)
    await start(dataclasses.replace(orchestrator, env={
        **orchestrator.env, f"RAGLINE_{stage.upper()}_ADDRESSES": f"127.0.0.1:{DEFAULT_PORTS[stage]},127.0.0.1:{port}"}))
    try:
        await settle(load, expected)
        began = time.monotonic()
        second.kill()
        second.wait(10)
        await asyncio.sleep(HOLD_S)
        second = await asyncio.to_thread(replica)
        back = time.monotonic()
        recovered = None
        while time.monotonic() < back + RECOVERY_WAIT_S:
            if await asyncio.to_thread(handled_ok, metrics_port, method) > 0:
                recovered = time.monotonic()
                break
            await asyncio.sleep(0.1)
        ended = time.monotonic()
        # The window's last requests finish before the orchestrator is swapped back (a fault of its own, not this one).
        await asyncio.sleep(DEADLINE_MS / 1000 + 0.5)
    finally:
        await asyncio.to_thread(kill, orchestrator)
        await start(orchestrator)
        stop_process(second)
    window = [o for o in load.outcomes if began <= o.started < ended]
    return summarize(fault.name, window, expected) | {
        "recovery_s": None if recovered is None else recovered - back, "flood": {}}


def summarize(name: str, outcomes: list[Outcome], expected: dict) -> dict:
    verdicts = Counter(verdict(o, expected) for o in outcomes)
    lat = sorted(o.ms for o in outcomes)
    return {
        "fault": name, "requests": len(outcomes), "verdicts": dict(verdicts),
        "statuses": dict(Counter(o.status for o in outcomes if not o.answered)),
        "degradations": dict(Counter(d for o in outcomes for d in o.degradations).most_common(3)),
        "wrong": [dataclasses.asdict(o) for o in outcomes if verdict(o, expected) == "wrong"][:3],
        "p50_ms": statistics.median(lat) if lat else 0.0, "p99_ms": lat[int(0.99 * (len(lat) - 1))] if lat else 0.0,
        "late": sum(o.ms > LATE_MS for o in outcomes),
    }


def fault_table(rows: list[dict]) -> str:
    lines = ["| fault | requests | correct | degraded, named | documented errors | other | p50 ms | p99 ms "
             "| past deadline + 100 ms | recovered after serving again |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        v = r["verdicts"]
        errors = ", ".join(f"{n} {s}" for s, n in sorted(r["statuses"].items(), key=lambda p: -p[1])) or "0"
        named = "; ".join(f"{d}: {n}" for d, n in r["degradations"].items())
        degraded = f"{v.get('degraded', 0)} ({named})" if named else str(v.get("degraded", 0))
        recovery = "not within 30 s" if r["recovery_s"] is None else f"{r['recovery_s']:.2f} s"
        lines.append(f"| {r['fault']} | {r['requests']} | {v.get('correct', 0)} | {degraded} | {errors} | {v.get('wrong', 0)} | "
                     f"{r['p50_ms']:.0f} | {r['p99_ms']:.0f} | {r['late']} | {recovery} |")
    return "\n".join(lines)


async def drill(names: list[str]) -> list[dict]:
    faults = [f for f in FAULTS if not names or f.name in names or f.kind in names or f.component in names]
    expected = await expected_answers()
    load = Load()
    running = asyncio.create_task(load.run())
    rows = []
    try:
        for fault in faults:
            print(f"  {fault.name}", flush=True)
            rows.append(await apply(fault, load, expected))
            r = rows[-1]
            print(f"    {r['requests']} requests {r['verdicts']} {r['statuses']} late {r['late']} "
                  f"recovered {r['recovery_s']}", flush=True)
            if r["flood"]:
                print(f"    the flood's own calls: {r['flood']}", flush=True)
            for wrong in r["wrong"]:  # the first three answers the drill cannot explain, to read
                print(f"    other: {wrong}", flush=True)
    finally:
        load.stopped.set()
        await running
    return rows


async def soak(requests: int, settle_at: int, gateway_pid: int) -> dict:
    """`requests` mixed answers; every process's resident memory once `settle_at` are done, its highest after, and
    at the end."""
    expected = await expected_answers()
    load = Load()
    load.limit = requests
    samples: list[tuple[int, dict[str, float]]] = []

    async def sample() -> None:
        while not load.stopped.is_set():
            samples.append((len(load.outcomes), memory({"bench-gateway": gateway_pid})))
            await asyncio.sleep(1.0)

    sampler = asyncio.create_task(sample())
    began = time.monotonic()
    await load.run()
    seconds = time.monotonic() - began
    load.stopped.set()
    await sampler
    samples.append((len(load.outcomes), memory({"bench-gateway": gateway_pid})))
    settled = next(m for n, m in samples if n >= settle_at)
    after = [m for n, m in samples if n >= settle_at]
    rows = {name: {"settled": mib, "max_after": max(m.get(name, 0.0) for m in after), "end": after[-1].get(name, 0.0)}
            for name, mib in settled.items()}
    return {"requests": len(load.outcomes), "seconds": seconds, "memory": rows,
            **summarize("soak", load.outcomes, expected)}


def soak_table(r: dict) -> str:
    lines = [f"{r['requests']} requests in {r['seconds']:.0f} s ({r['requests'] / r['seconds']:.1f}/s): {r['verdicts']}; "
             f"p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms, past deadline + 100 ms: {r['late']}.", "",
             "| process | RSS after the first 2,000 (MiB) | highest after (MiB) | at the end (MiB) | highest / settled |",
             "|---|---|---|---|---|"]
    for name, m in r["memory"].items():
        note = " (a trace store: not held to 1.1)" if name in GROWS_BY_DESIGN else ""
        lines.append(f"| {name} | {m['settled']:.0f} | {m['max_after']:.0f} | {m['end']:.0f} | {m['max_after'] / m['settled']:.3f}{note} |")
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.chaos")
    parser.add_argument("action", choices=["drill", "soak"])
    parser.add_argument("--only", default="", help="comma-separated faults, kinds or components (drill)")
    parser.add_argument("--requests", type=int, default=20_000, help="soak: requests in all")
    parser.add_argument("--settle-at", type=int, default=2_000, help="soak: memory is compared with this point")
    args = parser.parse_args()
    gateway = start_gateway()
    try:
        await ingest_corpus()
        stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M")
        if args.action == "drill":
            rows = await drill([n.strip() for n in args.only.split(",") if n.strip()])
            text = fault_table(rows)
            failures = [r["fault"] for r in rows if r["late"] or r["verdicts"].get("wrong")
                        or r["recovery_s"] is None or r["recovery_s"] > RECOVERY_TARGET_S]
        else:
            r = await soak(args.requests, args.settle_at, gateway.pid)
            text = soak_table(r)
            failures = [n for n, m in r["memory"].items() if m["max_after"] > 1.1 * m["settled"] and n not in GROWS_BY_DESIGN]
            if r["late"] or r["verdicts"].get("wrong"):
                failures.append("answers")
    finally:
        stop_process(gateway)
    path = ROOT / "bench" / "results" / f"{args.action}-{stamp}.md"
    path.write_text(f"# `python -m bench.chaos {args.action}` {stamp}\n\n{text}\n", encoding="utf-8")
    print(f"\n{text}\n\nwrote {path.relative_to(ROOT)}")
    if failures:
        raise SystemExit(f"past its targets: {', '.join(failures)}")


if __name__ == "__main__":
    asyncio.run(main())
