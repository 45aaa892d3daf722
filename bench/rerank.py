"""How the reranker's cost grows with its candidates, and what Chinese text costs it the first time it is seen."""

from __future__ import annotations

import grpc

from bench.common import ROOT, TENANT, timed_loop
from bench.stats import spreads, stats
from ragline.eval.datasets import load
from ragline.runtime.config import DEFAULT_PORTS
from ragline.v1 import (
    common_pb2,
    reranker_pb2,
    reranker_pb2_grpc,
    retrieval_pb2,
    retrieval_pb2_grpc,
)


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
