"""Document formats and the content hash: what the CLI, the gateway and retrieval agree on about a file."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TypeVar

from ragline.v1 import retrieval_pb2

# Formats read from a file's bytes by retrieval's parsers; their text stays empty on the wire.
BINARY_FORMATS = {".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx"}
TEXT_FORMATS = {
    ".md": "markdown", ".markdown": "markdown", ".txt": "text", ".rst": "text", ".html": "html", ".htm": "html",
    ".csv": "csv", ".py": "code", ".go": "code", ".js": "code", ".ts": "code", ".java": "code", ".rs": "code",
    ".c": "code", ".cc": "code", ".cpp": "code", ".h": "code",
}
SUPPORTED_SUFFIXES = sorted({*BINARY_FORMATS, *TEXT_FORMATS})


def format_of(name: str) -> str:
    """The format a file name says ('' when it says none we read)."""
    suffix = PurePosixPath(name.lower()).suffix
    return BINARY_FORMATS.get(suffix) or TEXT_FORMATS.get(suffix, "")


def unsupported(name: str) -> str:
    suffix = PurePosixPath(name).suffix or "(no extension)"
    return f"unsupported format {suffix}: ragline reads {' '.join(SUPPORTED_SUFFIXES)}"


T = TypeVar("T")


def batches(docs: Sequence[T], max_documents: int, max_bytes: int, size: Callable[[T], int]) -> Iterator[list[T]]:
    """Documents in ingestion calls of at most max_documents and (but for one huge document) max_bytes: how the CLI
    and the gateway's jobs both send them."""
    batch: list[T] = []
    total = 0
    for doc in docs:
        weight = size(doc)
        if batch and (len(batch) >= max_documents or total + weight > max_bytes):
            yield batch
            batch, total = [], 0
        batch.append(doc)
        total += weight
    if batch:
        yield batch


def content_hash(doc: retrieval_pb2.Document) -> str:
    """sha256 over everything that decides a document's chunks (its file or text, title, metadata and groups):
    equal hashes mean re-ingesting changes nothing. The CLI, the gateway's sync and retrieval all hash this way."""
    digest = hashlib.sha256(doc.content or doc.text.encode())
    digest.update(json.dumps([doc.title, sorted(doc.metadata.items()), sorted(set(doc.access_groups))], ensure_ascii=False).encode())
    return digest.hexdigest()


@dataclass
class SyncPlan:
    """What a sync changes: document ids to add, to replace, to leave as they are, and to delete."""

    add: list[str] = field(default_factory=list)
    change: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)


def plan_sync(local: Mapping[str, str], indexed: Mapping[str, str]) -> SyncPlan:
    """Compare a folder's documents with those indexed from it, both as id -> content hash (the CLI's and the
    API's sync both decide this way)."""
    plan = SyncPlan()
    for doc_id, digest in sorted(local.items()):
        known = indexed.get(doc_id)
        (plan.add if known is None else plan.unchanged if known == digest else plan.change).append(doc_id)
    plan.delete = sorted(set(indexed) - set(local))
    return plan
