"""The Generator gRPC service."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import grpc
from opentelemetry import trace

from ragline.runtime.config import load_settings
from ragline.runtime.server import bootstrap, serve
from ragline.text import detect_language
from ragline.v1 import generator_pb2, generator_pb2_grpc
from services.generator.config import GeneratorSettings
from services.generator.logic import DIRECT_ANSWER, decompose, extract_answer, rewrite, synthesize

tracer = trace.get_tracer("ragline.generator")


class Generator(generator_pb2_grpc.GeneratorServiceServicer):
    def __init__(self, settings: GeneratorSettings) -> None:
        self.settings = settings

    def _generate(self, inp: generator_pb2.GenerationInput) -> generator_pb2.GenerateResponse:
        s = self.settings
        context = list(inp.context)[: s.max_context_chunks]
        with tracer.start_as_current_span("generator.generate") as span:
            span.set_attributes({"ragline.mode": generator_pb2.GenerationMode.Name(inp.mode),
                                 "ragline.context_chunks": len(context)})
            if inp.mode == generator_pb2.GENERATION_MODE_DIRECT:
                return generator_pb2.GenerateResponse(answer=DIRECT_ANSWER[detect_language(inp.query)])
            if inp.mode == generator_pb2.GENERATION_MODE_SYNTHESIS:
                text, cites, not_found = synthesize(inp.query, list(inp.reasoning), context, s.max_sentences + len(inp.reasoning),
                                                    s.min_sentence_overlap)
            else:
                # A revision is stricter: only sentences that overlap the question more are kept.
                strict = 0.15 if inp.mode == generator_pb2.GENERATION_MODE_REVISE else 0.0
                text, cites, not_found = extract_answer(inp.query, context, s.max_sentences, s.min_sentence_overlap + strict)
            span.set_attributes({"ragline.not_found": not_found, "ragline.citations": len(cites)})
        return generator_pb2.GenerateResponse(answer=text, citations=cites, not_found=not_found)

    @staticmethod
    async def _check(inp: generator_pb2.GenerationInput, context: grpc.aio.ServicerContext) -> None:
        if not inp.query.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")

    async def Generate(self, request: generator_pb2.GenerateRequest, context: grpc.aio.ServicerContext) -> generator_pb2.GenerateResponse:
        await self._check(request.input, context)
        return self._generate(request.input)

    async def GenerateStream(
        self, request: generator_pb2.GenerateStreamRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[generator_pb2.GenerateStreamResponse]:
        await self._check(request.input, context)
        result = self._generate(request.input)
        # The extractive answer is streamed a sentence (with its marker) at a time.
        for piece in result.answer.replace("] ", "]\n").split("\n"):
            yield generator_pb2.GenerateStreamResponse(delta=piece)
        yield generator_pb2.GenerateStreamResponse(final=result)

    async def Decompose(self, request: generator_pb2.DecomposeRequest, context: grpc.aio.ServicerContext) -> generator_pb2.DecomposeResponse:
        if not request.query.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        if request.max_hops < 0 or request.max_hops > 10:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "max_hops must be within [0, 10]")
        with tracer.start_as_current_span("generator.decompose") as span:
            subs, kind = decompose(request.query, request.max_hops or 3)
            span.set_attributes({"ragline.decomposition": kind, "ragline.sub_questions": len(subs)})
        return generator_pb2.DecomposeResponse(
            sub_questions=[generator_pb2.SubQuestion(text=t, depends_on=d) for t, d in subs], kind=kind
        )

    async def RewriteQuery(
        self, request: generator_pb2.RewriteQueryRequest, context: grpc.aio.ServicerContext
    ) -> generator_pb2.RewriteQueryResponse:
        if not request.query.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        with tracer.start_as_current_span("generator.rewrite") as span:
            new = rewrite(request.query, list(request.previous_rewrites), list(request.feedback))
            span.set_attribute("ragline.rewrite", new)
        return generator_pb2.RewriteQueryResponse(query=new)


async def main() -> None:
    runtime = bootstrap("generator")
    settings = load_settings(GeneratorSettings)

    def register(server: grpc.aio.Server) -> Iterable[str]:
        generator_pb2_grpc.add_GeneratorServiceServicer_to_server(Generator(settings), server)
        return [generator_pb2.DESCRIPTOR.services_by_name["GeneratorService"].full_name]

    await serve("generator", settings.port, register, runtime)
