"""`make bench`: the cost of the mesh, load at the gateway, where the time goes, reranker cost and memory.

Absolute times on a shared 2-core machine are for reading; ratios measured side by side are for judging.
Every load loop is bounded in count and time and targets 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import grpc

from bench import embedding, model, quality, report, scale
from bench.common import ROOT, ROUNDS, ingest_corpus, memory, peak_memory, start_gateway
from bench.hops import chain_cost
from bench.load import gateway_load, per_strategy
from bench.mesh import cpu_per_request, mesh_vs_inprocess, noop_rpcs, tracing_overhead
from bench.rerank import reranker_cost
from ragline.dev.processes import stop_process
from ragline.runtime.config import DEFAULT_PORTS
from ragline.v1 import retrieval_pb2_grpc


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
    r["chain"] = await chain_cost(ROUNDS)
    r["mesh_cpu"] = await cpu_per_request(ROUNDS)
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
        r["pdf_ingest"] = await scale.pdf_ingest(retrieval_pb2_grpc.RetrievalServiceStub(ch))
    r["embedders"] = await scale.embedder_backends()
    r["runtimes"] = await asyncio.to_thread(embedding.speed)
    print("5/6 adaptive against fixed strategies, hops, reranker input length; the local model's share", flush=True)
    r["quality"] = await quality.measure()
    r["model"] = await model.model_share()
    r["seconds"] = time.monotonic() - t0
    out = ROOT / "bench" / "results"
    figures = report.plot(r, out / stamp)
    path = out / f"{stamp}.md"
    path.write_text(report.markdown(r, stamp, figures), encoding="utf-8")
    print(f"\n6/6 wrote {path.relative_to(ROOT)}\n")
    print(report.headline(r))


if __name__ == "__main__":
    asyncio.run(main())
