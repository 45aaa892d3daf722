"""The HTTP/JSON front end (FastAPI). Annotations are evaluated (no `from __future__ import annotations`): the request
models are made per app, with the limits of its settings, and FastAPI must resolve them."""

import json
import time
from collections.abc import AsyncIterator
from http import HTTPStatus
from typing import Annotated, Any, Literal

import grpc
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from google.protobuf.json_format import MessageToDict
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.routing import Match

from gateway.backend import Backend, GatewayError
from gateway.config import Caller
from gateway.jobs import document_size, result_view
from ragline.domain.access import GROUP_PATTERN, MAX_GROUPS, InvalidGroups, split_groups
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
    403: "The API key may not give a document these access groups (it is not in them)",
    404: "No such document or job for this API key (absent, or not readable with its groups)",
    413: "Body over the limit (RAGLINE_GATEWAY_MAX_BODY_BYTES)",
    415: "A body declared as something other than JSON (or, for uploads, multipart/form-data)",
    429: "Rate limit of this API key (or of requests without a valid key from this address) exceeded, or a stage is "
         "saturated: retry later",
    503: "A stage is down and nothing can degrade in its place",
    504: "The deadline (X-Request-Timeout-Ms, default 30 s) ran out",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorBody, "description": ERRORS[code]} for code in codes}


NonBlank = Annotated[str, Field(min_length=1, pattern=r"\S")]
GroupName = Annotated[str, Field(pattern=GROUP_PATTERN.pattern)]
# Groups in one string, as a key writes them: 'hr|finance'.
GROUP_LIST_PATTERN = rf"^({GROUP_PATTERN.pattern[1:-1]}(\|{GROUP_PATTERN.pattern[1:-1]}){{0,{MAX_GROUPS - 1}}})?$"
GroupList = Annotated[str, Field(pattern=GROUP_LIST_PATTERN)]


def answer_json(message: Any) -> dict[str, Any]:
    return MessageToDict(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


# What a JSON body may be declared as by clients that do not say: none, curl's -d default, or plain text.
_UNDECLARED = {"", "application/x-www-form-urlencoded", "text/plain"}


def _json_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


UPLOAD_PATHS = {"/v1/documents", "/v1/documents:sync"}


def _multipart(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "multipart/form-data"


class BodyLimit(BaseHTTPMiddleware):
    """413 for bodies over the limit (a file upload's limit is larger), whether or not Content-Length is declared.
    A JSON body sent without a JSON Content-Type (curl -d sends form-urlencoded) is read as JSON; one that is not
    JSON gets a 400 that says what to send, and a body declared as anything else a 415."""

    def __init__(self, app: Any, max_bytes: int, max_upload_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes
        self.max_upload_bytes = max_upload_bytes

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        declared = request.headers.get("content-length")
        upload = request.url.path in UPLOAD_PATHS and _multipart(request.headers.get("content-type", ""))
        limit = self.max_upload_bytes if upload else self.max_bytes
        too_big = JSONResponse(error_body("PAYLOAD_TOO_LARGE", f"request body over {limit} bytes"), status_code=413)
        if declared and declared.isdigit() and int(declared) > limit:
            return too_big
        if request.method in ("POST", "PUT") and not declared:
            # A chunked body is read only up to the limit: memory stays bounded whatever the client sends.
            chunks, size = [], 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    return too_big
                chunks.append(chunk)
            request._body = b"".join(chunks)  # what the route reads (Starlette replays it downstream)
        if request.method == "POST" and request.url.path.startswith("/v1/") and not upload:
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
    app.add_middleware(BodyLimit, max_bytes=s.max_body_bytes, max_upload_bytes=s.max_upload_bytes)

    # The request models carry the limits this gateway enforces, so a client generated from the schema knows them.
    class AnswerBody(BaseModel):
        query: str = Field(..., min_length=1, max_length=s.max_query_chars, pattern=r"\S",
                           description="The question, in Chinese or English.")
        strategy: Literal["auto", "standard", "multihop", "selfrag", "combined"] = "auto"
        session_id: str | None = Field(None, max_length=200)
        filters: dict[NonBlank, Annotated[list[str], Field(min_length=1)]] = Field(
            default_factory=dict, description="metadata field -> accepted values (at least one)")

    class Metadata(BaseModel):
        """String values, and access_groups: who may read the document (absent: the whole tenant)."""

        model_config = ConfigDict(extra="allow")
        __pydantic_extra__: dict[str, str] = Field(init=False)  # type: ignore[assignment]
        access_groups: list[GroupName] | GroupList = Field(default_factory=list)

    class DocumentBody(BaseModel):
        id: NonBlank
        title: str = ""
        text: str = Field(..., description="an empty text is reported as that document's error")
        source: str = ""
        metadata: Metadata = Field(default_factory=Metadata)
        sync_root: str = Field("", max_length=1000, description="the folder a sync keeps in step (see ragline sync)")

    class DocumentsBody(BaseModel):
        documents: list[DocumentBody] = Field(..., min_length=1, max_length=s.max_documents)

    answer_timeout = Header(None, ge=1, le=s.max_timeout_ms, description="the deadline, in milliseconds (default 30 s)")
    ingest_timeout = Header(None, ge=1, le=s.max_ingest_timeout_ms, description="the deadline, in milliseconds")
    api_errors = error_responses(400, 401, 413, 415, 429, 503, 504)
    read_errors = error_responses(400, 401, 404, 429, 503, 504)

    async def caller_of(request: Request, authorization: str | None = Header(None, description="Bearer <API key>")) -> Caller:
        """The key's tenant and groups. A dependency, so that the key and its rate limit are checked before the body is."""
        return await backend.authenticate(authorization, request.client.host if request.client else "unknown")

    CallerOfKey = Annotated[Caller, Depends(caller_of)]

    @app.exception_handler(GatewayError)
    async def _gateway_error(_: Request, exc: GatewayError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI's own refusals (a body that does not parse, an unknown path or method) in the gateway's error body.
        code = GRPC_CODE_OF.get(exc.status_code) or HTTPStatus(exc.status_code).name
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names only the methods of the first route of the path; a path has several (GET, DELETE).
            allowed = {m for r in app.routes if isinstance(r, APIRoute) and r.matches(request.scope)[0] != Match.NONE
                       for m in r.methods or ()}
            headers["Allow"] = ", ".join(sorted(allowed))
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in exc.errors())
        return JSONResponse(error_body("INVALID_ARGUMENT", problems), status_code=400)

    def _filters(raw: dict[str, list[str]]) -> list[common_pb2.MetadataFilter]:
        return [common_pb2.MetadataFilter(field=k, values=v) for k, v in raw.items()]

    @app.post("/v1/answer", summary="Answer a question with citations", responses=api_errors)
    async def answer(body: AnswerBody, caller: CallerOfKey,
                     x_request_timeout_ms: int | None = answer_timeout, cache_control: str | None = Header(None)) -> dict[str, Any]:
        budget = backend.budget(x_request_timeout_ms)
        q = backend.question(body.query, body.strategy, body.session_id or "", _filters(body.filters))
        # "Cache-Control: no-cache" asks for a fresh answer (it is still stored for later requests).
        result = await backend.answer(caller, q, budget, use_cache="no-cache" not in (cache_control or ""))
        STRATEGY_USED.labels(common_pb2.Strategy.Name(result.strategy_used)).inc()
        for d in result.degradations:
            DEGRADED.labels(d.split(" ")[0]).inc()
        return answer_json(result)

    @app.post("/v1/answer:stream", summary="Answer as server-sent events: delta events, then one final event",
              responses={200: {"content": {"text/event-stream": {}}, "description": "delta events, then one final event "
                               "(an error event if the answer fails once streaming began)"}, **api_errors},
              response_class=StreamingResponse)
    async def answer_stream(body: AnswerBody, caller: CallerOfKey,
                            x_request_timeout_ms: int | None = answer_timeout) -> StreamingResponse:
        budget = backend.budget(x_request_timeout_ms)
        q = backend.question(body.query, body.strategy, body.session_id or "", _filters(body.filters))
        stream = backend.answer_stream(caller, q, budget).__aiter__()
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

    upload_schema = {"type": "object", "required": ["files"], "properties": {
        "files": {"type": "array", "minItems": 1, "items": {"type": "string", "format": "binary"},
                  "description": "PDF, Word, PowerPoint, Excel, CSV, Markdown, text, HTML or code files"},
        "access_groups": {"type": "string", "pattern": GROUP_LIST_PATTERN,
                          "description": "groups separated by '|': who may read these documents"},
        "sync_root": {"type": "string", "maxLength": 1000}}}

    def _groups(value: str | list[str], where: str) -> list[str]:
        try:
            return split_groups(value)
        except InvalidGroups as exc:
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, f"{where}: {exc}") from None

    async def _read_documents(request: Request) -> list[retrieval_pb2.Document]:
        """The documents of a JSON body or of a multipart upload (each file one document, its name its id)."""
        if _multipart(request.headers.get("content-type", "")):
            try:
                form = await request.form(max_files=s.max_documents, max_fields=20)
            except Exception as exc:  # a malformed multipart body
                raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, f"multipart body: {exc}") from None
            groups = _groups(str(form.get("access_groups") or ""), "access_groups")
            sync_root = str(form.get("sync_root") or "")[:1000]
            docs = []
            for item in form.getlist("files"):
                if isinstance(item, str) or not item.filename:
                    raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, "files: each part must be a file with a file name")
                name = "/".join(p for p in item.filename.replace("\\", "/").split("/") if p not in ("", ".", ".."))
                docs.append(retrieval_pb2.Document(id=name, source=name, content=await item.read(), access_groups=groups,
                                                   sync_root=sync_root))
            return docs
        try:
            body = DocumentsBody.model_validate_json(await request.body())
        except ValueError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in getattr(exc, "errors", lambda: [])())
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, problems or str(exc)) from None
        docs = []
        for d in body.documents:
            meta = dict(d.metadata.__pydantic_extra__ or {})
            groups = _groups(d.metadata.access_groups, f"document {d.id!r}: metadata.access_groups")
            docs.append(retrieval_pb2.Document(id=d.id, title=d.title, text=d.text, source=d.source, metadata=meta,
                                               access_groups=groups, sync_root=d.sync_root))
        return docs

    @app.post("/v1/documents", summary="Ingest documents (JSON) or files (multipart); a large upload becomes a job",
              description="Answers 200 with each document's chunk count or error; an upload over "
                          f"{s.job_threshold_bytes} bytes, or one sent with 'Prefer: respond-async', answers 202 with a "
                          "job to read at GET /v1/jobs/{id}.",
              responses={202: {"description": "accepted as a job"}, **error_responses(400, 401, 403, 413, 415, 429, 503, 504)},
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": {"$ref": "#/components/schemas/DocumentsBody"}},
                  "multipart/form-data": {"schema": upload_schema}}}})
    async def documents(request: Request, caller: CallerOfKey, x_request_timeout_ms: int | None = ingest_timeout,
                        prefer: str | None = Header(None, description="'respond-async' to get a job at once")) -> Response:
        budget = backend.budget(x_request_timeout_ms, ingest=True)
        docs = await _read_documents(request)
        size = sum(map(document_size, docs))
        if "respond-async" in (prefer or "").lower() or size > s.job_threshold_bytes:
            backend.check_ingest(caller, docs)
            job = await backend.start_job(caller, docs)
            return JSONResponse({"job": job.view()}, status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})
        resp = await backend.ingest(caller, docs, budget)
        return JSONResponse({"results": [result_view(r) for r in resp.results], "chunks_written": resp.chunks_written,
                             "documents_failed": resp.documents_failed})

    sync_schema = {"type": "object", "required": ["files", "sync_root"], "properties": {
        **upload_schema["properties"], "sync_root": {"type": "string", "minLength": 1, "maxLength": 1000, "pattern": r"\S"},
        "dry_run": {"type": "boolean", "default": False, "description": "report what would change, change nothing"}}}

    @app.post("/v1/documents:sync", summary="Keep a folder and the index in step: add, replace and delete what changed",
              description="The files are the whole folder: those new or changed are ingested, unchanged ones skipped, and "
                          "documents of the same sync_root that are not among them deleted (documents from elsewhere are "
                          "never touched). With 'Prefer: respond-async' the work is a job.",
              responses={202: {"description": "accepted as a job"}, **error_responses(400, 401, 403, 413, 415, 429, 503, 504)},
              openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": sync_schema}}}})
    async def sync(request: Request, caller: CallerOfKey, x_request_timeout_ms: int | None = ingest_timeout,
                   prefer: str | None = Header(None, description="'respond-async' to get a job at once")) -> Response:
        budget = backend.budget(x_request_timeout_ms, ingest=True)
        if not _multipart(request.headers.get("content-type", "")):
            raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, "send the folder's files as multipart/form-data")
        docs = await _read_documents(request)
        form = await request.form()
        sync_root, dry_run = str(form.get("sync_root") or ""), str(form.get("dry_run") or "false").lower() in ("true", "1")
        plan = await backend.sync_plan(caller, sync_root, docs, budget)
        report: dict[str, Any] = {"sync_root": sync_root, "dry_run": dry_run, "added": plan.add, "changed": plan.change,
                                  "unchanged": plan.unchanged, "deleted": plan.delete}
        changed = set(plan.add + plan.change)
        todo = [d for d in docs if d.id in changed]
        if dry_run:
            return JSONResponse(report)
        if todo:
            backend.check_ingest(caller, todo)
        if "respond-async" in (prefer or "").lower():
            job = await backend.start_job(caller, todo, plan.delete)
            return JSONResponse({**report, "job": job.view()}, status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})
        resp = await backend.ingest(caller, todo, budget) if todo else retrieval_pb2.IngestResponse()
        await backend.delete_documents(caller, plan.delete, budget)
        return JSONResponse({**report, "results": [result_view(r) for r in resp.results], "documents_failed": resp.documents_failed})

    @app.get("/v1/jobs/{job_id}", summary="An ingestion job's progress and per-document results", responses=read_errors)
    async def job(job_id: str, caller: CallerOfKey) -> dict[str, Any]:
        found = await backend.jobs.get(caller.tenant, job_id)
        if found is None:
            raise GatewayError(grpc.StatusCode.NOT_FOUND, f"no job {job_id!r}")
        return found.view()

    @app.get("/v1/documents", summary="The documents this key can read, in id order, paged", responses=read_errors)
    async def list_documents(caller: CallerOfKey, page_size: int = Query(100, ge=1, le=1000),
                             page_token: str = Query("", pattern=r"^[0-9]{0,4}$"), sync_root: str = Query("", max_length=1000)) -> dict[str, Any]:
        page = await backend.list_documents(caller, sync_root, page_size, page_token, backend.budget(None))
        return {"documents": [answer_json(d) for d in page.documents], "next_page_token": page.next_page_token,
                "truncated": page.truncated}

    @app.get("/v1/documents/{document_id:path}", summary="One document as indexed", responses=read_errors)
    async def get_document(document_id: str, caller: CallerOfKey) -> dict[str, Any]:
        return answer_json(await backend.get_document(caller, document_id, backend.budget(None)))

    @app.delete("/v1/documents/{document_id:path}", summary="Delete a document and its chunks", responses=read_errors)
    async def delete_document(document_id: str, caller: CallerOfKey) -> dict[str, Any]:
        return {"id": document_id, "chunks_deleted": await backend.delete_document(caller, document_id, backend.budget(None))}

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
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                components.pop(name, None)
            # The documents body is read by hand (JSON or multipart), so FastAPI does not list its model.
            body_schema = DocumentsBody.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(body_schema.pop("$defs", {}))
            components["DocumentsBody"] = body_schema
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
