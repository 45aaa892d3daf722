"""The HTTP/JSON front end (FastAPI)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

import grpc
from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from google.protobuf.json_format import MessageToDict
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest
from pydantic import BaseModel, Field
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint

from gateway.backend import Backend, GatewayError
from ragline.v1 import common_pb2, retrieval_pb2

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}

REQUESTS = Counter("ragline_gateway_requests_total", "HTTP requests", ["path", "status"])
LATENCY = Histogram("ragline_gateway_request_seconds", "HTTP request latency", ["path"],
                    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30))
DEGRADED = Counter("ragline_gateway_degradations_total", "Answers that carried a degradation", ["kind"])
STRATEGY_USED = Counter("ragline_gateway_strategy_total", "Strategies used by answers", ["strategy"])


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def error_response(exc: GatewayError) -> JSONResponse:
    return JSONResponse(error_body(exc.code.name, exc.message), status_code=HTTP_STATUS.get(exc.code, 500))


class AnswerBody(BaseModel):
    query: str = Field(..., description="The question, in Chinese or English.")
    strategy: Literal["auto", "standard", "multihop", "selfrag", "combined"] = "auto"
    session_id: str | None = None
    filters: dict[str, list[str]] = Field(default_factory=dict, description="metadata field -> accepted values")


class DocumentBody(BaseModel):
    id: str
    title: str = ""
    text: str
    source: str = ""
    metadata: dict[str, str] = Field(default_factory=dict)


class DocumentsBody(BaseModel):
    documents: list[DocumentBody]


def answer_json(answer: common_pb2.Answer) -> dict[str, Any]:
    return MessageToDict(answer, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


# What a JSON body may be declared as by clients that do not say: none, curl's -d default, or plain text.
_UNDECLARED = {"", "application/x-www-form-urlencoded", "text/plain"}


def _json_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


class BodyLimit(BaseHTTPMiddleware):
    """413 for bodies over the limit, whether or not Content-Length is declared. A JSON body sent without a JSON
    Content-Type (curl -d sends form-urlencoded) is read as JSON; one that is not JSON gets a 400 that says what
    to send, and a body declared as anything else a 415."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        declared = request.headers.get("content-length")
        too_big = JSONResponse(error_body("PAYLOAD_TOO_LARGE", f"request body over {self.max_bytes} bytes"), status_code=413)
        if declared and declared.isdigit() and int(declared) > self.max_bytes:
            return too_big
        if request.method in ("POST", "PUT") and not declared:
            body = await request.body()
            if len(body) > self.max_bytes:
                return too_big
        if request.method == "POST" and request.url.path.startswith("/v1/"):
            declared_type = request.headers.get("content-type", "")
            if not _json_type(declared_type):
                media = declared_type.split(";", 1)[0].strip().lower()
                if media not in _UNDECLARED:
                    return JSONResponse(error_body("UNSUPPORTED_MEDIA_TYPE", f"send the body as JSON with "
                                                   f"'Content-Type: application/json', not {media!r}"), status_code=415)
                try:
                    json.loads(await request.body() or b"null")
                except ValueError:
                    return JSONResponse(error_body("INVALID_ARGUMENT", "the body is not JSON: send a JSON object with "
                                                   "'Content-Type: application/json'"), status_code=400)
                headers = [(k, v) for k, v in request.scope["headers"] if k != b"content-type"]
                request.scope["headers"] = [*headers, (b"content-type", b"application/json")]
        started = time.perf_counter()
        response = await call_next(request)
        path = request.scope.get("route").path if request.scope.get("route") else "other"  # type: ignore[union-attr]
        REQUESTS.labels(path, str(response.status_code)).inc()
        LATENCY.labels(path).observe(time.perf_counter() - started)
        return response


def create_app(backend: Backend) -> FastAPI:
    app = FastAPI(title="ragline", version="1.0.0",
                  description="Answers questions over your documents with citations (adaptive, multi-hop, self-RAG).")
    app.add_middleware(BodyLimit, max_bytes=backend.settings.max_body_bytes)

    @app.exception_handler(GatewayError)
    async def _gateway_error(_: Request, exc: GatewayError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in exc.errors())
        return JSONResponse(error_body("INVALID_ARGUMENT", problems), status_code=400)

    def _timeout(header: str | None) -> float | None:
        if header is None:
            return None
        try:
            return float(header)
        except ValueError:
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, f"X-Request-Timeout-Ms must be a number, got {header!r}") from None

    def _filters(raw: dict[str, list[str]]) -> list[common_pb2.MetadataFilter]:
        return [common_pb2.MetadataFilter(field=k, values=v) for k, v in raw.items()]

    @app.post("/v1/answer", summary="Answer a question with citations")
    async def answer(body: AnswerBody, authorization: str | None = Header(None),
                     x_request_timeout_ms: str | None = Header(None), cache_control: str | None = Header(None)) -> dict[str, Any]:
        tenant = backend.authenticate(authorization)
        budget = backend.budget(_timeout(x_request_timeout_ms))
        q = backend.question(body.query, body.strategy, body.session_id or "", _filters(body.filters))
        # "Cache-Control: no-cache" asks for a fresh answer (it is still stored for later requests).
        result = await backend.answer(tenant, q, budget, use_cache="no-cache" not in (cache_control or ""))
        STRATEGY_USED.labels(common_pb2.Strategy.Name(result.strategy_used)).inc()
        for d in result.degradations:
            DEGRADED.labels(d.split(" ")[0]).inc()
        return answer_json(result)

    @app.post("/v1/answer:stream", summary="Answer as server-sent events: delta events, then one final event")
    async def answer_stream(body: AnswerBody, authorization: str | None = Header(None),
                            x_request_timeout_ms: str | None = Header(None)) -> StreamingResponse:
        tenant = backend.authenticate(authorization)
        budget = backend.budget(_timeout(x_request_timeout_ms))
        q = backend.question(body.query, body.strategy, body.session_id or "", _filters(body.filters))

        async def events() -> AsyncIterator[str]:
            try:
                async for event in backend.answer_stream(tenant, q, budget):
                    if event.HasField("final"):
                        yield f"event: final\ndata: {json.dumps(answer_json(event.final), ensure_ascii=False)}\n\n"
                    else:
                        yield f"event: delta\ndata: {json.dumps({'text': event.delta}, ensure_ascii=False)}\n\n"
            except GatewayError as exc:
                yield f"event: error\ndata: {json.dumps(error_body(exc.code.name, exc.message))}\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/v1/documents", summary="Ingest documents; the result names each document's chunk count or error")
    async def documents(body: DocumentsBody, authorization: str | None = Header(None),
                        x_request_timeout_ms: str | None = Header(None)) -> dict[str, Any]:
        tenant = backend.authenticate(authorization)
        budget = backend.budget(_timeout(x_request_timeout_ms), ingest=True)
        docs = [retrieval_pb2.Document(id=d.id, title=d.title, text=d.text, source=d.source, metadata=d.metadata)
                for d in body.documents]
        resp = await backend.ingest(tenant, docs, budget)
        return {
            "results": [{"id": r.document_id, "chunks": r.chunks, **({"error": r.error} if r.error else {})} for r in resp.results],
            "chunks_written": resp.chunks_written,
            "documents_failed": resp.documents_failed,
        }

    @app.get("/healthz", summary="Liveness")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", summary="Readiness: ready only when the orchestrator is")
    async def readyz() -> JSONResponse:
        if await backend.orchestrator_ready():
            return JSONResponse({"status": "ready"})
        return JSONResponse(error_body("UNAVAILABLE", "orchestrator is not serving"), status_code=503)

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return app
