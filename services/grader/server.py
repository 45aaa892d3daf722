"""The Grader gRPC service."""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from opentelemetry import trace

from ragline.runtime.config import load_settings
from ragline.runtime.server import bootstrap, serve
from ragline.v1 import common_pb2, grader_pb2, grader_pb2_grpc
from services.grader.config import GraderSettings
from services.grader.logic import relevance, support, usefulness

tracer = trace.get_tracer("ragline.grader")


def _grade(ok: bool) -> int:
    return common_pb2.GRADE_YES if ok else common_pb2.GRADE_NO


class Grader(grader_pb2_grpc.GraderServiceServicer):
    def __init__(self, settings: GraderSettings) -> None:
        self.settings = settings

    async def GradeDocuments(
        self, request: grader_pb2.GradeDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> grader_pb2.GradeDocumentsResponse:
        if not request.query.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        grades = []
        with tracer.start_as_current_span("grader.documents") as span:
            for cand in request.candidates:
                score = relevance(request.query, cand.chunk.title, cand.chunk.text)
                grades.append(grader_pb2.DocumentGrade(
                    chunk_id=cand.chunk.id, relevant=_grade(score >= self.settings.min_relevance), score=score,
                    reason=f"query-term coverage {score:.2f}",
                ))
            span.set_attributes({"ragline.candidates": len(grades),
                                 "ragline.relevant": sum(g.relevant == common_pb2.GRADE_YES for g in grades)})
        return grader_pb2.GradeDocumentsResponse(grades=grades)

    async def GradeAnswer(
        self, request: grader_pb2.GradeAnswerRequest, context: grpc.aio.ServicerContext
    ) -> grader_pb2.GradeAnswerResponse:
        if not request.query.strip():
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query is empty")
        with tracer.start_as_current_span("grader.answer") as span:
            sup = support(request.answer, [c.chunk.text for c in request.context])
            use = usefulness(request.query, request.answer)
            supported = sup >= self.settings.min_support
            useful = use >= self.settings.min_usefulness
            span.set_attributes({"ragline.support_score": sup, "ragline.useful_score": use,
                                 "ragline.supported": supported, "ragline.useful": useful})
        return grader_pb2.GradeAnswerResponse(
            supported=_grade(supported), useful=_grade(useful), support_score=sup, useful_score=use,
            reason=f"answer words found in context {sup:.2f}; question words addressed {use:.2f}",
        )


async def main() -> None:
    runtime = bootstrap("grader")
    settings = load_settings(GraderSettings)

    def register(server: grpc.aio.Server) -> Iterable[str]:
        grader_pb2_grpc.add_GraderServiceServicer_to_server(Grader(settings), server)
        return [grader_pb2.DESCRIPTOR.services_by_name["GraderService"].full_name]

    await serve("grader", settings.port, register, runtime)
