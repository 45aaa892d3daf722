"""What the transport alone costs: a chain shaped like the standard flow (client -> "orchestrator" -> three
downstream calls in turn, as retrieval, reranker and generator are called) whose handlers do nothing but answer
with a payload the size of the passages each hop carries. Whatever the chain costs, a mesh of grpc-python
processes pays before any stage does work; set beside the in-process flow's p50 it is the floor of the ratio.

Variants, each on fresh processes: plain grpc.aio; the same with OpenTelemetry's gRPC instrumentation sampling 100 %
and exporting to Jaeger (as every ragline service does); and grpc's synchronous, thread-pool server and client.

Run: python -m bench.hops (needs Jaeger from `make up` for the traced variant)."""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable
from concurrent import futures

import grpc

from bench.common import ROOT, timed_loop
from bench.stats import spreads, stats

PAYLOAD_BYTES = 10_000  # about what one hop of the standard flow carries (ten passages)
LEAF_PORTS = (50271, 50272, 50273)
TOP_PORT = 50270
METHOD = "/bench.Hop/Call"
VARIANTS = ("plain", "traced", "sync")


def _handler(behaviour):  # type: ignore[no-untyped-def]
    return grpc.method_handlers_generic_handler("bench.Hop", {"Call": grpc.unary_unary_rpc_method_handler(behaviour)})


async def _serve_aio(port: int, downstream: list[int]) -> None:
    payload = b"x" * PAYLOAD_BYTES
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{p}") for p in downstream]
    calls = [ch.unary_unary(METHOD) for ch in channels]

    async def behaviour(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        for call in calls:  # in turn, as the standard flow calls its stages
            await call(payload, timeout=5)
        return payload

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_handler(behaviour),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def _serve_sync(port: int, downstream: list[int]) -> None:
    payload = b"x" * PAYLOAD_BYTES
    calls = [grpc.insecure_channel(f"127.0.0.1:{p}").unary_unary(METHOD) for p in downstream]

    def behaviour(request: bytes, context: grpc.ServicerContext) -> bytes:
        for call in calls:
            call(payload, timeout=5)
        return payload

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((_handler(behaviour),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


def _start(variant: str) -> list[subprocess.Popen[bytes]]:
    procs = []
    for port, downstream in [*((p, "") for p in LEAF_PORTS), (TOP_PORT, ",".join(map(str, LEAF_PORTS)))]:
        argv = [sys.executable, "-m", "bench.hops", "serve", variant, str(port), downstream]
        procs.append(subprocess.Popen(argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}))
    return procs


async def _wait_ready(seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(f"127.0.0.1:{TOP_PORT}") as ch:
        call = ch.unary_unary(METHOD)
        while True:
            try:
                await call(b"", timeout=1)
                return
            except grpc.aio.AioRpcError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


async def chain_cost(rounds: int = 3, variants: tuple[str, ...] = VARIANTS) -> dict[str, dict[str, tuple[float, float, float]]]:
    """p50/p95 of one call through the chain, sequential, and calls/s at 4 concurrent, per variant; the bench's
    client is plain grpc.aio throughout."""
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    for _ in range(rounds):
        for variant in variants:  # alternate, so drift on the machine hits every variant
            procs = _start(variant)
            try:
                await _wait_ready()
                async with grpc.aio.insecure_channel(f"127.0.0.1:{TOP_PORT}") as ch:
                    call = ch.unary_unary(METHOD)

                    def ask(call: grpc.aio.UnaryUnaryMultiCallable = call) -> Awaitable[object]:
                        return call(b"q", timeout=5)

                    await timed_loop(ask, 1, 1, 100)  # warm
                    seq, _, _ = await timed_loop(ask, 1, 5, 2000)
                    conc, _, elapsed = await timed_loop(ask, 4, 5, 5000)
                runs[variant].append({**stats(seq), "qps_4": len(conc) / elapsed})
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()
    return {v: spreads(rs, ("p50", "p95", "qps_4")) for v, rs in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="one process of the chain (started by the benchmark itself)")
    serve.add_argument("variant", choices=VARIANTS)
    serve.add_argument("port", type=int)
    serve.add_argument("downstream", nargs="?", default="")
    args = parser.parse_args()
    if args.command == "serve":
        downstream = [int(p) for p in args.downstream.split(",") if p]
        if args.variant == "sync":
            _serve_sync(args.port, downstream)
            return
        if args.variant == "traced":
            # ragline's own set-up (sampler, exporter, its batching, both interceptors), so the floor is what the
            # services pay.
            from ragline.runtime.config import RuntimeSettings
            from ragline.runtime.tracing import setup_tracing

            setup_tracing(f"bench-hops-{args.port}", RuntimeSettings(tracing=True, trace_sample_ratio=1.0))
        asyncio.run(_serve_aio(args.port, downstream))
        return
    for variant, figures in asyncio.run(chain_cost()).items():
        print(variant, {k: tuple(round(x, 2) for x in v) for k, v in figures.items()})


if __name__ == "__main__":
    main()
