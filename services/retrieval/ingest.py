"""Ingestion: each document validated, read (files that are not text by the parser processes) and chunked by its
structure; a document whose content hash is already indexed is skipped; every new chunk embedded (in worker
threads, batch by batch, so the event loop keeps serving), then written to Weaviate document by document, its
catalog record last. One bad document fails alone: its result carries the error and the rest of the batch goes on."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import numpy as np
from opentelemetry import trace

from ragline.domain.access import InvalidGroups, check_groups
from ragline.domain.documents import BINARY_FORMATS, content_hash, format_of, unsupported
from ragline.domain.text import detect_language
from ragline.embedding import Embedder
from ragline.runtime.errors import StatusError
from ragline.runtime.metrics import INGEST_CHUNKS, INGEST_DOCUMENTS
from ragline.v1 import common_pb2, retrieval_pb2
from services.retrieval.catalog import DocumentRecord
from services.retrieval.chunking import ChunkingOptions, Section, chunk_document, chunk_sections, detect_content_type
from services.retrieval.config import RetrievalSettings
from services.retrieval.formats import ParseError, parse_csv
from services.retrieval.sandbox import ParserPool
from services.retrieval.store import ChunkStore, DocumentChunks, StoredChunk

tracer = trace.get_tracer("ragline.retrieval")
_PARSED_FORMATS = set(BINARY_FORMATS.values())
# Raised whenever parsing, chunking or the stored copies change what a document's chunks are, so that unchanged
# files are re-indexed (3: the analysed English copy).
PIPELINE_VERSION = 3


@dataclass
class PreparedDocument:
    record: DocumentRecord
    lang: str
    chunks: list[StoredChunk]


# A prepared document waiting to be written, its result to fill in, its chunks' vectors.
Pending = tuple[PreparedDocument, retrieval_pb2.DocumentResult, np.ndarray]


class DocumentError(ValueError):
    """Why one document cannot be ingested (its result's error)."""


class Ingestor:
    def __init__(self, settings: RetrievalSettings, store: ChunkStore, embedder: Embedder, parsers: ParserPool | None = None) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.parsers = parsers or ParserPool(settings.parse_workers, settings.parse_timeout_s, settings.parse_memory_mb << 20)
        self.chunking = ChunkingOptions(settings.chunk_max_chars, settings.chunk_min_chars, settings.chunk_overlap_chars)
        c = self.chunking
        self.pipeline = f"v{PIPELINE_VERSION}:{c.max_chars}/{c.min_chars}/{c.overlap_chars}:{settings.embedder}"

    async def ingest(self, tenant: str, documents: list[retrieval_pb2.Document]) -> retrieval_pb2.IngestResponse:
        results = [retrieval_pb2.DocumentResult(document_id=doc.id) for doc in documents]
        timings = dict.fromkeys(("parse", "chunk", "embed", "write"), 0.0)
        with tracer.start_as_current_span("retrieval.ingest") as span:
            span.set_attributes({"ragline.tenant": tenant, "ragline.documents": len(documents)})
            known = await self.store.bounded(self.store.catalog.records(tenant, sorted({d.id for d in documents if d.id.strip()})))
            prepared: list[PreparedDocument | None] = []
            for doc, result in zip(documents, results, strict=True):
                try:
                    prep = await self.prepare(doc, timings)
                except DocumentError as exc:
                    result.error = str(exc)
                    prep = None
                if prep is not None:
                    result.content_hash = prep.record.content_hash
                    indexed = known.get(doc.id)
                    if indexed and (indexed.content_hash, indexed.sync_root, indexed.pipeline) == (
                            prep.record.content_hash, doc.sync_root, self.pipeline):
                        result.unchanged, result.chunks, prep = True, indexed.chunks, None
                prepared.append(prep)
            chunks = [c for p in prepared if p for c in p.chunks]
            started = time.perf_counter()
            vectors = await self._embed_passages(chunks)
            timings["embed"] += time.perf_counter() - started
            started = time.perf_counter()
            pending, offset = [], 0
            for prep, result in zip(prepared, results, strict=True):
                if prep is not None:
                    pending.append((prep, result, vectors[offset : offset + len(prep.chunks)]))
                    offset += len(prep.chunks)
            await self._write_all(tenant, pending)
            timings["write"] += time.perf_counter() - started
            response = retrieval_pb2.IngestResponse(
                results=results, timings=[common_pb2.StageTiming(stage=k, millis=v * 1000) for k, v in timings.items()])
            response.documents_failed = sum(1 for r in results if r.error)
            response.chunks_written = sum(r.chunks for r in results if not r.error and not r.unchanged)
            INGEST_DOCUMENTS.labels("ok").inc(len(results) - response.documents_failed)
            INGEST_DOCUMENTS.labels("failed").inc(response.documents_failed)
            INGEST_CHUNKS.inc(response.chunks_written)
            span.set_attributes({"ragline.chunks_written": response.chunks_written,
                                 "ragline.documents_failed": response.documents_failed})
        return response

    async def _write_all(self, tenant: str, pending: list[Pending]) -> None:
        """Documents written in slices of about write_batch_chunks chunks, each slice two Weaviate batches (chunks,
        then records) instead of a few calls per document. A document's record goes in only after its chunks, so a
        record always means its chunks are complete. Each slice is bounded in time; once one fails and Weaviate is
        not ready, the rest fail at once instead of each waiting out the timeout."""
        unavailable = ""
        for part in _slices(pending, self.settings.write_batch_chunks):
            if unavailable:
                for _, result, _ in part:
                    result.error = f"not written: {unavailable}"
                continue
            try:
                await self.store.bounded(self._write_slice(tenant, part))
            except Exception as exc:
                reason = exc.message if isinstance(exc, StatusError) else f"{type(exc).__name__}: {exc}"
                for _, result, _ in part:
                    result.error = reason
                if not await self.store.ready():
                    unavailable = "Weaviate is unavailable"

    async def _write_slice(self, tenant: str, part: list[Pending]) -> None:
        refused = await self.store.write_documents(tenant, [
            DocumentChunks(p.record.id, p.chunks, v, p.lang, p.record.format, p.record.access_groups) for p, _, v in part])
        kept = [p for p, _, _ in part if p.record.id not in refused]
        for p in kept:
            p.record.chunks = len(p.chunks)
        refused |= await self.store.catalog.put_many(tenant, [p.record for p in kept])
        for p, r, _ in part:
            if p.record.id in refused:
                r.error = refused[p.record.id]
            else:
                r.chunks = len(p.chunks)

    async def prepare(self, doc: retrieval_pb2.Document, timings: dict[str, float]) -> PreparedDocument:
        """Validate, read and chunk one document; DocumentError says why it cannot be ingested."""
        if not doc.id.strip():
            raise DocumentError("document id is empty")
        try:
            groups = check_groups(doc.access_groups)
        except InvalidGroups as exc:
            raise DocumentError(str(exc)) from None
        if doc.content and len(doc.content) > self.settings.max_file_bytes:
            raise DocumentError(f"file of {len(doc.content) // 2**20} MiB is over the {self.settings.max_file_bytes // 2**20} MiB limit")
        fmt = doc.content_type or format_of(doc.source) or ("" if doc.content else detect_content_type(doc.source, doc.text))
        body = doc.content or doc.text.encode()
        if not body.strip():
            raise DocumentError("empty document: no text and no file content")
        if not fmt:
            raise DocumentError(unsupported(doc.source or doc.id))
        title = doc.title or (_stem(doc.source or doc.id) if fmt in _PARSED_FORMATS else "")
        started = time.perf_counter()
        parts = 0
        if fmt in _PARSED_FORMATS:
            try:
                parsed = await self.parsers.parse(body, fmt, doc.title)
            except ParseError as exc:
                raise DocumentError(str(exc)) from None
            title, parts, text = parsed.title or title, parsed.parts, "\n".join(s.text for s in parsed.sections)
            sections: list[Section] | None = parsed.sections
        else:
            try:
                text = doc.text or doc.content.decode("utf-8-sig")
            except UnicodeDecodeError:
                raise DocumentError(f"not UTF-8 text, though its name says {fmt}") from None
            sections = parse_csv(text, title) if fmt == "csv" else None
        timings["parse"] += time.perf_counter() - started
        started = time.perf_counter()
        lang = detect_language(text)
        metadata = {**doc.metadata, "lang": lang, "doc_type": fmt}
        if doc.source:
            metadata["source"] = doc.source
        pieces = chunk_sections(sections, self.chunking) if sections is not None else chunk_document(text, title, fmt, self.chunking)
        chunks = [StoredChunk(doc.id, i, sec.title or title, sec.text, doc.source, {**metadata, **sec.meta})
                  for i, sec in enumerate(pieces)]
        timings["chunk"] += time.perf_counter() - started
        if not chunks:
            raise DocumentError("no text to index")
        record = DocumentRecord(id=doc.id, title=title, source=doc.source, format=fmt, access_groups=groups,
                                sync_root=doc.sync_root, parts=parts, pipeline=self.pipeline,
                                content_hash=content_hash(doc))
        return PreparedDocument(record, lang, chunks)

    async def _embed_passages(self, chunks: list[StoredChunk]) -> np.ndarray:
        """One vector per chunk; a text that occurs more than once (a boilerplate footer, a repeated heading) is
        embedded once. A remote embedder takes several batches at once, one request each (its concurrency)."""
        texts = [f"{c.title}\n{c.text}" for c in chunks]
        unique = list(dict.fromkeys(texts))
        batch = self.settings.embed_batch * getattr(self.embedder, "concurrency", 1)
        with tracer.start_as_current_span("retrieval.embed_passages") as span:
            span.set_attributes({"ragline.chunks": len(chunks), "ragline.distinct_texts": len(unique)})
            parts = [await asyncio.to_thread(self.embedder.embed_passages, unique[i : i + batch])
                     for i in range(0, len(unique), batch)]
        if not parts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        vectors = np.concatenate(parts)
        row = {text: i for i, text in enumerate(unique)}
        return vectors[[row[t] for t in texts]]


def _slices(items: list[Pending], chunks: int) -> list[list[Pending]]:
    """Consecutive documents grouped up to about `chunks` chunks a group (a longer document is a group alone)."""
    groups: list[list[Pending]] = [[]]
    size = 0
    for item in items:
        if groups[-1] and size + len(item[0].chunks) > chunks:
            groups.append([])
            size = 0
        groups[-1].append(item)
        size += len(item[0].chunks)
    return [g for g in groups if g]


def _stem(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    return (base.rsplit(".", 1)[0] if "." in base else base).replace("_", " ").replace("-", " ")
