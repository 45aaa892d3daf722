"""The chunk collection in Weaviate: connection, schema, idempotent writes and native hybrid search. With
catalog.py (document records) and collections.py (what both collections share), the only modules that talk to
Weaviate."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import grpc
import numpy as np
import weaviate
from weaviate.classes.config import Configure, DataType, Property, Reconfigure, Tokenization
from weaviate.classes.init import AdditionalConfig, GrpcConfig
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery
from weaviate.exceptions import WeaviateBaseError
from weaviate.util import generate_uuid5

from ragline.domain.access import readable_by, stored_groups
from ragline.domain.text import cjk_only
from ragline.embedding import cosine
from ragline.runtime.clients import FAST_RECONNECT
from ragline.runtime.errors import StatusError
from services.retrieval.analysis import english_copy
from services.retrieval.catalog import DocumentCatalog
from services.retrieval.collections import ACCESS_GROUPS, TenantCollection, keyword
from services.retrieval.config import RetrievalSettings
from services.retrieval.scores import parse_explain

T = TypeVar("T")
Fusion = Literal["relative_score", "ranked"]
_FUSIONS: dict[str, HybridFusion] = {"relative_score": HybridFusion.RELATIVE_SCORE, "ranked": HybridFusion.RANKED}
# The BM25 copies a default search reads: English stemmed without stop words (analysis.py; already split, so
# Weaviate only splits on spaces), Chinese segmented by Weaviate's gse_ch (Latin words blanked: gse_ch would split
# them into letters). The `title` and `text` properties keep the words as written, for callers that ask for them.
ANALYSED_PROPERTIES = [
    Property(name="title_en", data_type=DataType.TEXT, tokenization=Tokenization.WHITESPACE),
    Property(name="text_en", data_type=DataType.TEXT, tokenization=Tokenization.WHITESPACE),
    Property(name="title_zh", data_type=DataType.TEXT, tokenization=Tokenization.GSE_CH),
    Property(name="text_zh", data_type=DataType.TEXT, tokenization=Tokenization.GSE_CH),
]
# Metadata fields copied into their own filterable properties; the rest are searchable as "key=value" tags.
_TAG_SEP = "="


@dataclass
class StoredChunk:
    document_id: str
    chunk_index: int
    title: str
    text: str
    source: str
    metadata: dict[str, str]


@dataclass
class DocumentChunks:
    """What write_documents stores of one document."""
    document_id: str
    chunks: Sequence[StoredChunk]
    vectors: np.ndarray
    lang: str
    doc_type: str
    access_groups: Sequence[str] = ()


@dataclass
class Hit:
    uuid: str
    chunk: StoredChunk
    score: float
    bm25: float
    vector: float
    explain: str


def chunk_uuid(tenant: str, document_id: str, index: int) -> str:
    """Deterministic, so re-ingesting a document overwrites its chunks in place."""
    return str(generate_uuid5(f"{tenant}/{document_id}/{index}"))


def _tags(metadata: dict[str, str]) -> list[str]:
    return [f"{k}{_TAG_SEP}{v}" for k, v in sorted(metadata.items())]


class ChunkStore:
    def __init__(self, client: weaviate.WeaviateAsyncClient, collection: str, bm25: tuple[float, float] = (1.2, 0.75),
                 timeout_s: float = 10.0) -> None:
        self.client = client
        self.name = collection
        self.bm25 = bm25
        self.timeout_s = timeout_s
        self.collection = TenantCollection(client, collection)
        # One record per document, beside its chunks.
        self.catalog = DocumentCatalog(client, f"{collection}Document")

    @classmethod
    async def open(cls, settings: RetrievalSettings, collection: str | None = None) -> ChunkStore:
        """Connect to the Weaviate that the settings name and make sure the collection exists."""
        client = weaviate.use_async_with_local(
            host=settings.weaviate_host, port=settings.weaviate_http_port, grpc_port=settings.weaviate_grpc_port,
            additional_config=AdditionalConfig(grpc_config=GrpcConfig(channel_options=FAST_RECONNECT)))
        await client.connect()
        store = cls(client, collection or settings.collection, (settings.bm25_k1, settings.bm25_b), settings.weaviate_timeout_s)
        await store.ensure_schema()
        await store.catalog.ensure_schema()
        return store

    async def close(self) -> None:
        await self.client.close()

    async def ready(self) -> bool:
        """Weaviate answers its readiness check (within a couple of seconds)."""
        try:
            return bool(await asyncio.wait_for(self.client.is_ready(), 2.0))
        except (TimeoutError, OSError, WeaviateBaseError):
            return False

    async def bounded(self, work: Awaitable[T], seconds: float | None = None) -> T:
        """`work` within the store's timeout, else UNAVAILABLE; within `seconds` (the caller's time left), else
        DEADLINE_EXCEEDED, whichever is shorter. Weaviate's client retries an unreachable server with backoff for
        about a minute; a caller would wait that long for a dead Weaviate."""
        deadline_first = seconds is not None and seconds < self.timeout_s
        limit = max(seconds, 0.0) if deadline_first and seconds is not None else self.timeout_s
        try:
            return await asyncio.wait_for(work, limit)
        except TimeoutError:
            if deadline_first:
                raise StatusError(grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline passed while Weaviate answered") from None
            raise StatusError(grpc.StatusCode.UNAVAILABLE, f"Weaviate did not answer within {limit:.1f} s") from None
        except WeaviateBaseError as exc:
            if await self.ready():
                raise
            raise StatusError(grpc.StatusCode.UNAVAILABLE, f"Weaviate is unavailable ({type(exc).__name__})") from None

    async def drop(self) -> None:
        """Delete the whole collection, every tenant with it (the scale benchmark's own collection)."""
        await self.collection.drop()
        await self.catalog.collection.drop()

    async def ensure_schema(self) -> None:
        text = lambda name, tok: Property(name=name, data_type=DataType.TEXT, tokenization=tok)  # noqa: E731
        created = await self.collection.create([
            keyword("document_id"),
            Property(name="chunk_index", data_type=DataType.INT),
            text("title", Tokenization.WORD),
            text("text", Tokenization.WORD),
            *ANALYSED_PROPERTIES,
            keyword("source"),
            keyword("lang"),
            keyword("doc_type"),
            Property(name="tags", data_type=DataType.TEXT_ARRAY, tokenization=Tokenization.FIELD, index_searchable=False),
            Property(name="metadata_json", data_type=DataType.TEXT, index_filterable=False, index_searchable=False),
            ACCESS_GROUPS,
        ], Configure.inverted_index(bm25_k1=self.bm25[0], bm25_b=self.bm25[1]))
        if not created:
            # A collection made by an earlier version gains the properties it lacks. Its chunks have no value for
            # them: invisible until re-ingested (access groups), or found by their vector only (the English copy);
            # the README's upgrade note says to sync again.
            config = await self.client.collections.use(self.name).config.get()
            have = {p.name for p in config.properties}
            for prop in (ACCESS_GROUPS, *ANALYSED_PROPERTIES):
                if prop.name not in have:
                    await self.client.collections.use(self.name).config.add_property(prop)
            bm25 = config.inverted_index_config.bm25
            if (bm25.k1, bm25.b) != self.bm25:
                await self.client.collections.use(self.name).config.update(
                    inverted_index_config=Reconfigure.inverted_index(bm25_k1=self.bm25[0], bm25_b=self.bm25[1]))

    async def write_documents(self, tenant: str, documents: Sequence[DocumentChunks]) -> dict[str, str]:
        """Upsert the chunks of several documents in one batch, then delete any chunks left over from longer earlier
        versions in one query. Returns the documents Weaviate refused a chunk of, with the reason (their leftovers
        stay: an earlier version's chunks are better than none until the document is ingested again)."""
        coll = await self.collection.of(tenant)
        from weaviate.classes.data import DataObject

        objects, owners = [], []
        for doc in documents:
            for chunk, vector in zip(doc.chunks, doc.vectors, strict=True):
                props = {
                    "document_id": doc.document_id,
                    "chunk_index": chunk.chunk_index,
                    "title": chunk.title,
                    "text": chunk.text,
                    "title_en": english_copy(chunk.title),
                    "text_en": english_copy(chunk.text),
                    "title_zh": cjk_only(chunk.title),
                    "text_zh": cjk_only(chunk.text),
                    "source": chunk.source,
                    "lang": doc.lang,
                    "doc_type": doc.doc_type,
                    "tags": _tags(chunk.metadata),
                    "metadata_json": json.dumps(chunk.metadata, ensure_ascii=False),
                    "access_groups": stored_groups(doc.access_groups),
                }
                objects.append(DataObject(properties=props, uuid=chunk_uuid(tenant, doc.document_id, chunk.chunk_index),
                                          vector=vector.tolist()))
                owners.append(doc.document_id)
        refused: dict[str, str] = {}
        if objects:
            result = await coll.data.insert_many(objects)
            for index, error in result.errors.items():
                refused.setdefault(owners[index], f"Weaviate refused a chunk: {error.message}")
        leftovers = [Filter.by_property("document_id").equal(doc.document_id)
                     & Filter.by_property("chunk_index").greater_or_equal(len(doc.chunks))
                     for doc in documents if doc.document_id not in refused]
        if leftovers:
            await coll.data.delete_many(where=Filter.any_of(leftovers) if len(leftovers) > 1 else leftovers[0])
        return refused

    async def write_document(
        self, tenant: str, document_id: str, chunks: Sequence[StoredChunk], vectors: np.ndarray, lang: str, doc_type: str,
        access_groups: Sequence[str] = (),
    ) -> int:
        """One document's chunks (write_documents for one); RuntimeError when Weaviate refuses any."""
        refused = await self.write_documents(tenant, [DocumentChunks(document_id, chunks, vectors, lang, doc_type, access_groups)])
        if refused:
            raise RuntimeError(refused[document_id])
        return len(chunks)

    async def delete_tenant(self, tenant: str) -> bool:
        existed = await self.collection.remove_tenant(tenant)
        await self.catalog.collection.remove_tenant(tenant)
        return existed

    async def delete_documents(self, tenant: str, document_ids: list[str], access_groups: Sequence[str]) -> int:
        coll = await self.collection.of(tenant)
        result = await coll.data.delete_many(where=Filter.by_property("document_id").contains_any(document_ids)
                                             & Filter.by_property("access_groups").contains_any(readable_by(access_groups)))
        return int(result.successful)

    async def hybrid(
        self,
        tenant: str,
        query: str,
        vector: np.ndarray | None,
        alpha: float,
        fusion: Fusion,
        query_properties: list[str],
        limit: int,
        max_vector_distance: float | None,
        filters: dict[str, list[str]],
        access_groups: Sequence[str] = (),
    ) -> list[Hit]:
        """Weaviate's native hybrid query; with vector None (alpha 0) a plain BM25 query, with no embedding. Only
        chunks the caller's groups may read are candidates: the filter is part of the query."""
        coll = await self.collection.of(tenant)
        where = _build_filter(filters, access_groups)
        metadata = MetadataQuery(score=True, explain_score=True)
        if vector is None:
            res = await coll.query.bm25(query=query, query_properties=query_properties, limit=limit, filters=where,
                                        return_metadata=metadata)
        else:
            res = await coll.query.hybrid(
                query=query,
                vector=vector.tolist(),
                alpha=alpha,
                fusion_type=_FUSIONS[fusion],
                query_properties=query_properties,
                limit=limit,
                max_vector_distance=max_vector_distance,
                filters=where,
                return_metadata=metadata,
                include_vector=True,
            )
        hits = []
        for obj in res.objects:
            p = obj.properties
            if vector is None:
                bm25, vec = float(obj.metadata.score or 0.0), 0.0
            else:
                bm25, vec = parse_explain(obj.metadata.explain_score or "")
                # The explain text scores only what the vector search itself found; a candidate that only BM25
                # found would read as similarity 0. Its true similarity is one dot product away.
                stored = (obj.vector or {}).get("default")
                if stored is not None:
                    vec = cosine(vector, stored)
            hits.append(
                Hit(
                    uuid=str(obj.uuid),
                    chunk=StoredChunk(
                        document_id=str(p.get("document_id", "")),
                        chunk_index=int(p.get("chunk_index") or 0),
                        title=str(p.get("title", "")),
                        text=str(p.get("text", "")),
                        source=str(p.get("source", "")),
                        metadata=json.loads(str(p.get("metadata_json") or "{}")),
                    ),
                    score=float(obj.metadata.score or 0.0),
                    bm25=bm25,
                    vector=vec,
                    explain=obj.metadata.explain_score or "",
                )
            )
        return hits


# Filters on these fields go to their own properties; any other field is matched through the tags.
_DIRECT_FIELDS = {"document_id", "source", "lang", "doc_type"}


def _build_filter(filters: dict[str, list[str]], access_groups: Sequence[str]) -> Any:
    parts = [Filter.by_property("access_groups").contains_any(readable_by(access_groups))]
    for field_name, values in filters.items():
        if field_name in _DIRECT_FIELDS:
            parts.append(Filter.by_property(field_name).contains_any(values))
        else:
            parts.append(Filter.by_property("tags").contains_any([f"{field_name}{_TAG_SEP}{v}" for v in values]))
    return Filter.all_of(parts) if len(parts) > 1 else parts[0]
