"""Ingestion: each document validated and chunked by its structure, every chunk embedded (in worker threads,
batch by batch, so the event loop keeps serving), then written to Weaviate document by document. One bad
document fails alone: its result carries the error and the rest of the batch goes on."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np
from opentelemetry import trace

from ragline.domain.text import detect_language
from ragline.embedding import Embedder
from ragline.runtime.metrics import INGEST_CHUNKS, INGEST_DOCUMENTS
from ragline.v1 import retrieval_pb2
from services.retrieval.chunking import ChunkingOptions, chunk_document, detect_content_type
from services.retrieval.config import RetrievalSettings
from services.retrieval.store import ChunkStore, StoredChunk

tracer = trace.get_tracer("ragline.retrieval")


@dataclass
class PreparedDocument:
    document_id: str
    lang: str
    content_type: str
    chunks: list[StoredChunk]


class Ingestor:
    def __init__(self, settings: RetrievalSettings, store: ChunkStore, embedder: Embedder) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.chunking = ChunkingOptions(settings.chunk_max_chars, settings.chunk_min_chars, settings.chunk_overlap_chars)

    async def ingest(self, tenant: str, documents: list[retrieval_pb2.Document]) -> retrieval_pb2.IngestResponse:
        results = [retrieval_pb2.DocumentResult(document_id=doc.id) for doc in documents]
        with tracer.start_as_current_span("retrieval.ingest") as span:
            span.set_attributes({"ragline.tenant": tenant, "ragline.documents": len(documents)})
            prepared = [self.prepare(doc, result) for doc, result in zip(documents, results, strict=True)]
            chunks = [c for p in prepared if p for c in p.chunks]
            vectors = await self._embed_passages(chunks)
            offset = 0
            for prep, result in zip(prepared, results, strict=True):
                if prep is None:
                    continue
                doc_vectors = vectors[offset : offset + len(prep.chunks)]
                offset += len(prep.chunks)
                try:
                    result.chunks = await self.store.write_document(
                        tenant, prep.document_id, prep.chunks, doc_vectors, prep.lang, prep.content_type)
                except Exception as exc:  # one bad document must not abort the batch
                    result.error = f"{type(exc).__name__}: {exc}"
            response = retrieval_pb2.IngestResponse(results=results)
            response.documents_failed = sum(1 for r in results if r.error)
            response.chunks_written = sum(r.chunks for r in results if not r.error)
            INGEST_DOCUMENTS.labels("ok").inc(len(results) - response.documents_failed)
            INGEST_DOCUMENTS.labels("failed").inc(response.documents_failed)
            INGEST_CHUNKS.inc(response.chunks_written)
            span.set_attributes({"ragline.chunks_written": response.chunks_written,
                                 "ragline.documents_failed": response.documents_failed})
        return response

    def prepare(self, doc: retrieval_pb2.Document, result: retrieval_pb2.DocumentResult) -> PreparedDocument | None:
        """Validate and chunk one document; None (with result.error set) when it cannot be ingested."""
        if not doc.id.strip():
            result.error = "document id is empty"
            return None
        if not doc.text.strip():
            result.error = "document text is empty"
            return None
        content_type = doc.content_type or detect_content_type(doc.source, doc.text)
        lang = detect_language(doc.text)
        metadata = {**doc.metadata, "lang": lang, "doc_type": content_type}
        if doc.source:
            metadata["source"] = doc.source
        sections = chunk_document(doc.text, doc.title, content_type, self.chunking)
        chunks = [StoredChunk(doc.id, i, sec.title or doc.title, sec.text, doc.source, metadata) for i, sec in enumerate(sections)]
        return PreparedDocument(doc.id, lang, content_type, chunks)

    async def _embed_passages(self, chunks: list[StoredChunk]) -> np.ndarray:
        # A remote embedder takes several batches at once, one request each (its concurrency).
        batch = self.settings.embed_batch * getattr(self.embedder, "concurrency", 1)
        with tracer.start_as_current_span("retrieval.embed_passages") as span:
            span.set_attribute("ragline.chunks", len(chunks))
            parts = [
                await asyncio.to_thread(self.embedder.embed_passages, [f"{c.title}\n{c.text}" for c in chunks[i : i + batch]])
                for i in range(0, len(chunks), batch)
            ]
        return np.concatenate(parts) if parts else np.zeros((0, self.embedder.dim), dtype=np.float32)
