"""What every benchmark section shares: the questions, the benchmark's own gateway, bounded load loops and memory."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from ragline.client.documents import RawDocument, load_files
from ragline.dev.processes import http_ok, spawn_module
from ragline.runtime.config import DEFAULT_PORTS
from ragline.v1 import retrieval_pb2, retrieval_pb2_grpc

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
        await retrieval_pb2_grpc.RetrievalServiceStub(ch).Ingest(retrieval_pb2.IngestRequest(
            tenant=TENANT, documents=[d.message() for d in docs]), timeout=600)


def start_gateway() -> subprocess.Popen[bytes]:
    return spawn_module("gateway", {
        "RAGLINE_API_KEYS": f"{API_KEY}:{TENANT}", "RAGLINE_GATEWAY_PORT": str(BENCH_GRPC_PORT),
        "RAGLINE_GATEWAY_HTTP_PORT": str(BENCH_HTTP_PORT), "RAGLINE_GATEWAY_RATE_LIMIT_PER_S": "1000000",
        "RAGLINE_GATEWAY_RATE_LIMIT_BURST": "1000000", "RAGLINE_GATEWAY_CACHE_ENABLED": "false",
    }, http_ok(f"http://127.0.0.1:{BENCH_HTTP_PORT}/readyz"), "bench-gateway")


async def peak_memory(peaks: dict[str, float], every_s: float = 0.5) -> None:
    """The highest resident memory of each process seen while this task runs (cancel it to stop)."""
    while True:
        for name, mib in memory().items():
            peaks[name] = max(peaks.get(name, 0.0), mib)
        await asyncio.sleep(every_s)


def stack_pids() -> dict[str, int]:
    """The pid of every process `make up` started, by name (its pid files; a process may have gone since)."""
    return {f.stem: int(f.read_text().split()[0]) for f in sorted((ROOT / ".run" / "pids").glob("*.pid"))}


def memory(extra: dict[str, int] | None = None) -> dict[str, float]:
    """Resident MiB of every process `make up` started, and of the extra ones named (name -> pid)."""
    out = {}
    for name, pid in (stack_pids() | (extra or {})).items():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        out[name] = rss_kb / 1024
    return out
