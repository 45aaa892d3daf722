"""The Reranker gRPC service."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import grpc
from opentelemetry import trace

from ragline.runtime.config import load_settings
from ragline.runtime.server import bootstrap, serve
from ragline.v1 import common_pb2, reranker_pb2, reranker_pb2_grpc
from services.reranker.config import RerankerSettings
from services.reranker.features import Candidate
from services.reranker.logic import Scorer, load_scorer

tracer = trace.get_tracer("ragline.reranker")


class Reranker(reranker_pb2_grpc.RerankerServiceServicer):
    def __init__(self, settings: RerankerSettings, scorer: Scorer) -> None:
        self.settings = settings
        self.scorer = scorer

    async def Rerank(self, request: reranker_pb2.RerankRequest, context: grpc.aio.ServicerContext) -> reranker_pb2.RerankResponse:
        s = self.settings
        if not request.query.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        if len(request.candidates) > s.max_candidates:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"{len(request.candidates)} candidates; the limit is {s.max_candidates}")
        if request.top_k < 0:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "top_k must not be negative")
        top_k = request.top_k or s.default_top_k
        with tracer.start_as_current_span("reranker.score") as span:
            span.set_attributes({"ragline.model": self.scorer.name, "ragline.candidates": len(request.candidates),
                                 "ragline.top_k": top_k})
            candidates = [Candidate.of(c, s.max_length * 4) for c in request.candidates]
            scores = await asyncio.to_thread(self.scorer.score, request.query, candidates) if candidates else []
        ranked = sorted(zip(request.candidates, scores, strict=True), key=lambda p: p[1], reverse=True)[:top_k]
        results = []
        for cand, score in ranked:
            out = common_pb2.ScoredChunk()
            out.CopyFrom(cand)
            out.score = score
            out.scores.rerank = score
            out.scores.reranked = True
            probability = self.scorer.probability(score)
            if probability is not None:
                out.scores.relevance_probability = probability
            results.append(out)
        return reranker_pb2.RerankResponse(results=results, model=self.scorer.name)


def build(settings: RerankerSettings) -> Reranker:
    """The servicer with its scoring model loaded (seconds for a cross-encoder: call it off the event loop)."""
    return Reranker(settings, load_scorer(settings.model, settings.max_length, settings.batch_size))


async def main() -> None:
    runtime = bootstrap("reranker")
    settings = load_settings(RerankerSettings)
    servicer = await asyncio.to_thread(build, settings)

    def register(server: grpc.aio.Server) -> Iterable[str]:
        reranker_pb2_grpc.add_RerankerServiceServicer_to_server(servicer, server)
        return [reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name]

    await serve("reranker", settings.port, register, runtime)
