"""The Generator gRPC service."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path

import grpc
from opentelemetry import trace

from ragline.domain.answers import stream_pieces
from ragline.domain.glossary import Glossaries, load_glossaries
from ragline.embedding import load_embedder
from ragline.llm import LlmClient, Usage, llm_configured, with_fallback
from ragline.runtime.caches import cache_dir, cache_file
from ragline.runtime.config import load_settings
from ragline.runtime.server import bootstrap, serve
from ragline.runtime.streams import pieces_while_running
from ragline.v1 import common_pb2, generator_pb2, generator_pb2_grpc
from services.generator.backends import LlmGenerator, OfflineGenerator
from services.generator.config import GeneratorSettings

tracer = trace.get_tracer("ragline.generator")


class Generator(generator_pb2_grpc.GeneratorServiceServicer):
    def __init__(self, offline: OfflineGenerator, llm: LlmGenerator | None) -> None:
        self.offline = offline
        self.llm = llm

    async def _generate(self, inp: generator_pb2.GenerationInput,
                        on_delta: Callable[[str], None] | None = None) -> generator_pb2.GenerateResponse:
        usage = Usage()
        with tracer.start_as_current_span("generator.generate") as span:
            span.set_attributes({"ragline.mode": generator_pb2.GenerationMode.Name(inp.mode),
                                 "ragline.context_chunks": len(inp.context)})
            result = await with_fallback(
                "generate", self.llm and (lambda: self.llm.generate(inp, usage, on_delta)), lambda: self.offline.generate(inp, usage), usage)
            span.set_attributes({"ragline.not_found": result.not_found, "ragline.citations": len(result.citations)})
        result.usage.CopyFrom(usage.to_proto())
        return result

    @staticmethod
    async def _check(query: str, context: grpc.aio.ServicerContext) -> None:
        if not query.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")

    async def Generate(self, request: generator_pb2.GenerateRequest, context: grpc.aio.ServicerContext) -> generator_pb2.GenerateResponse:
        await self._check(request.input.query, context)
        return await self._generate(request.input)

    async def GenerateStream(
        self, request: generator_pb2.GenerateStreamRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[generator_pb2.GenerateStreamResponse]:
        """A model's tokens as it produces them, then the final response (markers checked: its text is the answer).
        The offline backend's answer is streamed a sentence, with its marker, at a time."""
        await self._check(request.input.query, context)
        started = time.perf_counter()
        deltas: asyncio.Queue[str] = asyncio.Queue()
        task = asyncio.create_task(self._generate(request.input, deltas.put_nowait if self.llm else None))
        streamed = False
        first_token_ms = 0.0
        async for piece in pieces_while_running(task, deltas):
            if not streamed:
                first_token_ms, streamed = (time.perf_counter() - started) * 1000, True
            yield generator_pb2.GenerateStreamResponse(delta=piece)
        result = task.result()
        if not streamed:
            for piece in stream_pieces(result.answer):
                yield generator_pb2.GenerateStreamResponse(delta=piece)
        result.first_token_ms = first_token_ms
        yield generator_pb2.GenerateStreamResponse(final=result)

    async def Decompose(self, request: generator_pb2.DecomposeRequest, context: grpc.aio.ServicerContext) -> generator_pb2.DecomposeResponse:
        await self._check(request.query, context)
        if not 0 <= request.max_hops <= 10:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "max_hops must be within [0, 10]")
        usage = Usage()
        max_hops = request.max_hops or 3
        with tracer.start_as_current_span("generator.decompose") as span:
            subs, kind = await with_fallback(
                "decompose", self.llm and (lambda: self.llm.decompose(request.query, max_hops, usage)),
                lambda: self.offline.decompose(request.query, max_hops, usage), usage)
            span.set_attributes({"ragline.domain.decomposition": kind, "ragline.sub_questions": len(subs)})
        return generator_pb2.DecomposeResponse(
            sub_questions=[common_pb2.SubQuestion(text=t, depends_on=d) for t, d in subs], kind=kind, usage=usage.to_proto())

    async def RewriteQuery(
        self, request: generator_pb2.RewriteQueryRequest, context: grpc.aio.ServicerContext
    ) -> generator_pb2.RewriteQueryResponse:
        await self._check(request.query, context)
        usage = Usage()
        previous, feedback = list(request.previous_rewrites), list(request.feedback)
        with tracer.start_as_current_span("generator.rewrite") as span:
            new = await with_fallback(
                "rewrite", self.llm and (lambda: self.llm.rewrite(request.query, previous, feedback, usage)),
                lambda: self.offline.rewrite(request.query, previous, feedback, usage), usage)
            span.set_attribute("ragline.rewrite", new)
        return generator_pb2.RewriteQueryResponse(query=new, usage=usage.to_proto())


def build(settings: GeneratorSettings, glossaries: Glossaries | None = None, caches: Path | None = None) -> Generator:
    """The servicer: the offline generator (with the tenants' glossaries and its sentence embedder, a few seconds to
    load: call it off the event loop), and an LLM generator when a model is configured."""
    llm = LlmGenerator(LlmClient.for_stage(settings), settings) if llm_configured() else None
    embedder = load_embedder(settings.embedder, cache_file(settings.embed_cache, caches)) if settings.embedder else None
    return Generator(OfflineGenerator(settings, glossaries, embedder), llm)


async def main() -> None:
    runtime = bootstrap("generator")
    settings = load_settings(GeneratorSettings)
    servicer = await asyncio.to_thread(build, settings, load_glossaries(runtime.glossaries), cache_dir(runtime))

    def register(server: grpc.aio.Server) -> Iterable[str]:
        generator_pb2_grpc.add_GeneratorServiceServicer_to_server(servicer, server)
        return [generator_pb2.DESCRIPTOR.services_by_name["GeneratorService"].full_name]

    await serve("generator", settings.port, register, runtime)
