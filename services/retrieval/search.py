"""Search: a request checked against the limits, the query embedded (unless it is pure BM25), Weaviate's native
hybrid query, and each hit returned with its score breakdown."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from opentelemetry import trace

from ragline.domain.access import InvalidGroups, check_groups
from ragline.domain.glossary import Glossaries
from ragline.domain.tenants import TENANT_RULE, is_valid_tenant
from ragline.domain.text import detect_language
from ragline.embedding import Embedder
from ragline.runtime.call_context import call_time_left
from ragline.v1 import common_pb2, retrieval_pb2
from services.retrieval.analysis import keyword_query
from services.retrieval.config import RetrievalSettings
from services.retrieval.store import ChunkStore, Fusion, Hit

tracer = trace.get_tracer("ragline.retrieval")

_FUSIONS: dict[int, Fusion] = {
    retrieval_pb2.FUSION_TYPE_UNSPECIFIED: "relative_score",
    retrieval_pb2.FUSION_TYPE_RELATIVE_SCORE: "relative_score",
    retrieval_pb2.FUSION_TYPE_RANKED: "ranked",
}
# The analysed copies (store.ANALYSED_PROPERTIES) by default; `title` and `text` hold the English as written.
_ANALYSED_ENGLISH = {"title_en", "text_en"}
_RAW_ENGLISH = {"title", "text"}
_SEARCHABLE = _ANALYSED_ENGLISH | _RAW_ENGLISH | {"title_zh", "text_zh"}


def default_query_properties(title_boost: float) -> list[str]:
    return [f"title_en^{title_boost:g}", "text_en", f"title_zh^{title_boost:g}", "text_zh"]


class InvalidArgument(ValueError):
    """A request retrieval refuses; the message says why."""


def validate_tenant(tenant: str) -> str:
    if not is_valid_tenant(tenant):
        raise InvalidArgument(f"bad tenant name {tenant!r}: use {TENANT_RULE}")
    return tenant


@dataclass
class SearchArgs:
    alpha: float
    properties: list[str]
    limit: int
    filters: dict[str, list[str]]
    fusion: Fusion
    max_vector_distance: float | None
    access_groups: list[str]


def search_args(request: retrieval_pb2.SearchRequest, s: RetrievalSettings) -> SearchArgs:
    """The request's search, with the tenant's alpha or the default for the question's language; InvalidArgument for
    anything out of bounds."""
    validate_tenant(request.tenant)
    if not request.query.strip():
        raise InvalidArgument("query is empty")
    if len(request.query) > s.max_query_chars:
        raise InvalidArgument(f"query is {len(request.query)} characters; the limit is {s.max_query_chars}")
    if request.HasField("alpha"):
        alpha = request.alpha
    elif request.tenant in s.tenant_alpha:
        alpha = s.tenant_alpha[request.tenant]
    else:
        alpha = s.default_alpha_zh if detect_language(request.query) == "zh" else s.default_alpha
    if not 0.0 <= alpha <= 1.0:
        raise InvalidArgument(f"alpha must be within [0, 1], got {alpha}")
    limit = request.limit or s.default_limit
    if not 1 <= limit <= s.max_limit:
        raise InvalidArgument(f"limit must be within [1, {s.max_limit}], got {limit}")
    props = []
    for qp in request.query_properties:
        if qp.name not in _SEARCHABLE:
            raise InvalidArgument(f"unknown query property {qp.name!r}; searchable: {sorted(_SEARCHABLE)}")
        props.append(f"{qp.name}^{qp.boost:g}" if qp.boost and qp.boost != 1 else qp.name)
    names = {qp.name for qp in request.query_properties}
    if names & _ANALYSED_ENGLISH and names & _RAW_ENGLISH:
        # One keyword query goes to every property: stemmed terms would miss the words as written.
        raise InvalidArgument("query either the analysed English properties (title_en, text_en) or the raw ones "
                              "(title, text), not both")
    filters: dict[str, list[str]] = {}
    for f in request.filters:
        if not f.field or not f.values:
            raise InvalidArgument("a metadata filter needs a field and at least one value")
        filters.setdefault(f.field, []).extend(f.values)
    fusion = _FUSIONS.get(request.fusion)
    if fusion is None:
        raise InvalidArgument(f"unknown fusion type {request.fusion}")
    max_distance = request.max_vector_distance if request.HasField("max_vector_distance") else None
    try:
        groups = check_groups(request.access_groups)
    except InvalidGroups as exc:
        raise InvalidArgument(str(exc)) from None
    return SearchArgs(alpha, props or default_query_properties(s.bm25_title_boost), limit, filters, fusion, max_distance, groups)


def to_scored_chunk(tenant: str, hit: Hit) -> common_pb2.ScoredChunk:
    c = hit.chunk
    return common_pb2.ScoredChunk(
        chunk=common_pb2.Chunk(
            id=hit.uuid, document_id=c.document_id, tenant=tenant, title=c.title, text=c.text,
            source=c.source, metadata=c.metadata, chunk_index=c.chunk_index,
        ),
        score=hit.score,
        scores=common_pb2.ScoreBreakdown(bm25=hit.bm25, vector=hit.vector, fused=hit.score, explain=hit.explain),
    )


class Searcher:
    def __init__(self, store: ChunkStore, embedder: Embedder, glossaries: Glossaries | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.glossaries = glossaries or Glossaries()

    async def search(self, request: retrieval_pb2.SearchRequest, args: SearchArgs) -> retrieval_pb2.SearchResponse:
        with tracer.start_as_current_span("retrieval.search") as span:
            span.set_attributes({"ragline.tenant": request.tenant, "ragline.alpha": args.alpha, "ragline.top_k": args.limit,
                                 "ragline.fusion": f"FUSION_TYPE_{args.fusion.upper()}", "ragline.filters": str(args.filters)})
            t0 = time.perf_counter()
            vector = None
            if args.alpha > 0:  # pure BM25 needs no query vector
                with tracer.start_as_current_span("retrieval.embed_query"):
                    vector = (await asyncio.to_thread(self.embedder.embed_queries, [request.query]))[0]
            t1 = time.perf_counter()
            # The tenant's synonyms widen the keyword side only: the vector side already reads meaning.
            keywords = self.glossaries.for_tenant(request.tenant).expand(request.query)
            if keywords != request.query:
                span.set_attribute("ragline.glossary_terms", keywords[len(request.query):].strip())
            if any(p.split("^")[0] in _ANALYSED_ENGLISH for p in args.properties):
                # A query of stop words only has no terms left: then it goes as written.
                keywords = keyword_query(keywords) or keywords
            with tracer.start_as_current_span("weaviate.hybrid"):
                hits = await self.store.bounded(self.store.hybrid(
                    request.tenant, keywords, vector, args.alpha, args.fusion, args.properties, args.limit,
                    args.max_vector_distance, args.filters, args.access_groups), call_time_left())
            t2 = time.perf_counter()
            span.set_attribute("ragline.results", len(hits))
        return retrieval_pb2.SearchResponse(
            results=[to_scored_chunk(request.tenant, h) for h in hits],
            alpha=args.alpha,
            timings=[
                common_pb2.StageTiming(stage="embed", millis=(t1 - t0) * 1000),
                common_pb2.StageTiming(stage="weaviate_hybrid", millis=(t2 - t1) * 1000),
            ],
        )
