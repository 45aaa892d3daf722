"""The Grader gRPC service."""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from opentelemetry import trace

from ragline.domain.glossary import Glossaries, load_glossaries
from ragline.llm import LlmClient, Usage, llm_configured, with_fallback
from ragline.runtime.config import load_settings
from ragline.runtime.server import bootstrap, serve
from ragline.v1 import common_pb2, grader_pb2, grader_pb2_grpc
from services.grader.backends import LlmGrader, OfflineGrader
from services.grader.config import GraderSettings

tracer = trace.get_tracer("ragline.grader")


def _grade(ok: bool) -> int:
    return common_pb2.GRADE_YES if ok else common_pb2.GRADE_NO


class Grader(grader_pb2_grpc.GraderServiceServicer):
    def __init__(self, offline: OfflineGrader, llm: LlmGrader | None) -> None:
        self.offline = offline
        self.llm = llm

    async def GradeDocuments(
        self, request: grader_pb2.GradeDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> grader_pb2.GradeDocumentsResponse:
        if not request.query.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        usage = Usage()
        with tracer.start_as_current_span("grader.documents") as span:
            candidates = list(request.candidates)
            verdicts = await with_fallback(
                "grade_documents", self.llm and (lambda: self.llm.documents(request.query, candidates, usage)),
                lambda: self.offline.documents(request.query, candidates, usage), usage)
            grades = [grader_pb2.DocumentGrade(chunk_id=c.chunk.id, relevant=_grade(v.relevant), score=v.score, reason=v.reason)
                      for c, v in zip(request.candidates, verdicts, strict=True)]
            span.set_attributes({"ragline.candidates": len(grades), "ragline.relevant": sum(v.relevant for v in verdicts)})
        return grader_pb2.GradeDocumentsResponse(grades=grades, usage=usage.to_proto())

    async def GradeAnswer(
        self, request: grader_pb2.GradeAnswerRequest, context: grpc.aio.ServicerContext
    ) -> grader_pb2.GradeAnswerResponse:
        if not request.query.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        usage = Usage()
        with tracer.start_as_current_span("grader.answer") as span:
            ctx = list(request.context)
            v = await with_fallback(
                "grade_answer", self.llm and (lambda: self.llm.answer(request.query, request.answer, ctx, usage)),
                lambda: self.offline.answer(request.query, request.answer, ctx, usage), usage)
            span.set_attributes({"ragline.support_score": v.support_score, "ragline.useful_score": v.useful_score,
                                 "ragline.supported": v.supported, "ragline.useful": v.useful})
        return grader_pb2.GradeAnswerResponse(
            supported=_grade(v.supported), useful=_grade(v.useful), support_score=v.support_score,
            useful_score=v.useful_score, reason=v.reason, usage=usage.to_proto(),
        )


def build(settings: GraderSettings, glossaries: Glossaries | None = None) -> Grader:
    """The servicer: the offline grader (with the tenants' glossaries), and an LLM grader when a model is configured."""
    llm = LlmGrader(LlmClient.for_stage(settings), settings.llm_votes) if llm_configured() else None
    return Grader(OfflineGrader(settings, glossaries), llm)


async def main() -> None:
    runtime = bootstrap("grader")
    settings = load_settings(GraderSettings)
    servicer = build(settings, load_glossaries(runtime.glossaries))

    def register(server: grpc.aio.Server) -> Iterable[str]:
        grader_pb2_grpc.add_GraderServiceServicer_to_server(servicer, server)
        return [grader_pb2.DESCRIPTOR.services_by_name["GraderService"].full_name]

    await serve("grader", settings.port, register, runtime)
