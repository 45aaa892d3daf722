"""The HTTP/JSON front end (FastAPI). Annotations are evaluated (no `from __future__ import annotations`): the request
models are made per app, with the limits of its settings, and FastAPI must resolve them."""

import json
import time
from collections.abc import AsyncIterator
from http import HTTPStatus
from typing import Annotated, Any, Literal

import grpc
from fastapi import Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from google.protobuf.json_format import MessageToDict
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint

from gateway.backend import Backend, GatewayError
from ragline.v1 import common_pb2, orchestrator_pb2, retrieval_pb2

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
# The other way, for the errors FastAPI raises itself (a body that does not parse: INVALID_ARGUMENT).
GRPC_CODE_OF = {status: code.name for code, status in HTTP_STATUS.items()}

REQUESTS = Counter("ragline_gateway_requests_total", "HTTP requests", ["path", "status"])
LATENCY = Histogram("ragline_gateway_request_seconds", "HTTP request latency", ["path"],
                    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30))
DEGRADED = Counter("ragline_gateway_degradations_total", "Answers that carried a degradation", ["kind"])
STRATEGY_USED = Counter("ragline_gateway_strategy_total", "Strategies used by answers", ["strategy"])


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def error_response(exc: GatewayError) -> JSONResponse:
    return JSONResponse(error_body(exc.code.name, exc.message), status_code=HTTP_STATUS.get(exc.code, 500))


class ErrorDetail(BaseModel):
    code: str = Field(..., description="the gRPC status name, e.g. INVALID_ARGUMENT, UNAUTHENTICATED, DEADLINE_EXCEEDED")
    message: str = Field(..., description="what is wrong, for a person")


class ErrorBody(BaseModel):
    error: ErrorDetail


ERRORS = {
    400: "Invalid argument: the body, a header or a limit (the message names which)",
    401: "Missing or invalid API key: send 'Authorization: Bearer <key>'",
    413: "Body over the limit (RAGLINE_GATEWAY_MAX_BODY_BYTES)",
    415: "A body declared as something other than JSON",
    429: "Rate limit of this API key exceeded, or a stage is saturated: retry later",
    503: "A stage is down and nothing can degrade in its place",
    504: "The deadline (X-Request-Timeout-Ms, default 30 s) ran out",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorBody, "description": ERRORS[code]} for code in codes}


NonBlank = Annotated[str, Field(min_length=1, pattern=r"\S")]


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
    s = backend.settings
    app = FastAPI(title="ragline", version="1.0.0",
                  description="Answers questions over your documents with citations (adaptive, multi-hop, self-RAG).")
    app.add_middleware(BodyLimit, max_bytes=s.max_body_bytes)

    # The request models carry the limits this gateway enforces, so a client generated from the schema knows them.
    class AnswerBody(BaseModel):
        query: str = Field(..., min_length=1, max_length=s.max_query_chars, pattern=r"\S",
                           description="The question, in Chinese or English.")
        strategy: Literal["auto", "standard", "multihop", "selfrag", "combined"] = "auto"
        session_id: str | None = Field(None, max_length=200)
        filters: dict[NonBlank, Annotated[list[str], Field(min_length=1)]] = Field(
            default_factory=dict, description="metadata field -> accepted values (at least one)")

    class DocumentBody(BaseModel):
        id: NonBlank
        title: str = ""
        text: str = Field(..., description="an empty text is reported as that document's error")
        source: str = ""
        metadata: dict[str, str] = Field(default_factory=dict)

    class DocumentsBody(BaseModel):
        documents: list[DocumentBody] = Field(..., min_length=1, max_length=s.max_documents)

    answer_timeout = Header(None, ge=1, le=s.max_timeout_ms, description="the deadline, in milliseconds (default 30 s)")
    ingest_timeout = Header(None, ge=1, le=s.max_ingest_timeout_ms, description="the deadline, in milliseconds")
    api_errors = error_responses(400, 401, 413, 415, 429, 503, 504)

    def tenant_of(authorization: str | None = Header(None, description="Bearer <API key>")) -> str:
        """The key's tenant. A dependency, so that the key and its rate limit are checked before the body is."""
        return backend.authenticate(authorization)

    @app.exception_handler(GatewayError)
    async def _gateway_error(_: Request, exc: GatewayError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI's own refusals (a body that does not parse, an unknown path or method) in the gateway's error body.
        code = GRPC_CODE_OF.get(exc.status_code) or HTTPStatus(exc.status_code).name
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in exc.errors())
        return JSONResponse(error_body("INVALID_ARGUMENT", problems), status_code=400)

    def _filters(raw: dict[str, list[str]]) -> list[common_pb2.MetadataFilter]:
        return [common_pb2.MetadataFilter(field=k, values=v) for k, v in raw.items()]

    @app.post("/v1/answer", summary="Answer a question with citations", responses=api_errors)
    async def answer(body: AnswerBody, tenant: str = Depends(tenant_of),
                     x_request_timeout_ms: int | None = answer_timeout, cache_control: str | None = Header(None)) -> dict[str, Any]:
        budget = backend.budget(x_request_timeout_ms)
        q = backend.question(body.query, body.strategy, body.session_id or "", _filters(body.filters))
        # "Cache-Control: no-cache" asks for a fresh answer (it is still stored for later requests).
        result = await backend.answer(tenant, q, budget, use_cache="no-cache" not in (cache_control or ""))
        STRATEGY_USED.labels(common_pb2.Strategy.Name(result.strategy_used)).inc()
        for d in result.degradations:
            DEGRADED.labels(d.split(" ")[0]).inc()
        return answer_json(result)

    @app.post("/v1/answer:stream", summary="Answer as server-sent events: delta events, then one final event",
              responses={200: {"content": {"text/event-stream": {}}, "description": "delta events, then one final event "
                               "(an error event if the answer fails once streaming began)"}, **api_errors},
              response_class=StreamingResponse)
    async def answer_stream(body: AnswerBody, tenant: str = Depends(tenant_of),
                            x_request_timeout_ms: int | None = answer_timeout) -> StreamingResponse:
        budget = backend.budget(x_request_timeout_ms)
        q = backend.question(body.query, body.strategy, body.session_id or "", _filters(body.filters))
        stream = backend.answer_stream(tenant, q, budget).__aiter__()
        # Nothing is sent before the first event: a stream that fails before it (a stage down, the deadline) gets
        # its status code like /v1/answer; only a failure after it becomes an error event.
        try:
            first = await stream.__anext__()
        except StopAsyncIteration:
            first = None

        def sse(event: orchestrator_pb2.RunFlowStreamResponse) -> str:
            if event.HasField("final"):
                return f"event: final\ndata: {json.dumps(answer_json(event.final), ensure_ascii=False)}\n\n"
            return f"event: delta\ndata: {json.dumps({'text': event.delta}, ensure_ascii=False)}\n\n"

        async def events() -> AsyncIterator[str]:
            if first is None:
                return
            yield sse(first)
            try:
                async for event in stream:
                    yield sse(event)
            except GatewayError as exc:
                yield f"event: error\ndata: {json.dumps(error_body(exc.code.name, exc.message))}\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/v1/documents", summary="Ingest documents; the result names each document's chunk count or error",
              responses=api_errors)
    async def documents(body: DocumentsBody, tenant: str = Depends(tenant_of),
                        x_request_timeout_ms: int | None = ingest_timeout) -> dict[str, Any]:
        budget = backend.budget(x_request_timeout_ms, ingest=True)
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

    @app.get("/readyz", summary="Readiness: ready only when the orchestrator is", responses=error_responses(503))
    async def readyz() -> JSONResponse:
        if await backend.orchestrator_ready():
            return JSONResponse({"status": "ready"})
        return JSONResponse(error_body("UNAVAILABLE", "orchestrator is not serving"), status_code=503)

    @app.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    def openapi() -> dict[str, Any]:
        """FastAPI documents 422 for invalid requests; this gateway answers them 400 with its error body."""
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            for path in schema["paths"].values():
                for operation in path.values():
                    operation.get("responses", {}).pop("422", None)
                    # An optional header is absent, never null: document the type it has when sent.
                    for param in operation.get("parameters", []):
                        options = param.get("schema", {}).get("anyOf")
                        if param.get("in") == "header" and options:
                            kept = [o for o in options if o.get("type") != "null"]
                            if len(kept) == 1:
                                param["schema"] = {**{k: v for k, v in param["schema"].items() if k != "anyOf"}, **kept[0]}
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
