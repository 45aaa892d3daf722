"""Document formats and the content hash: what the CLI, the gateway and retrieval agree on about a file."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

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


def content_hash(body: bytes, title: str, metadata: Mapping[str, str], groups: Iterable[str]) -> str:
    """sha256 over everything that decides a document's chunks: equal hashes mean re-ingesting changes nothing."""
    digest = hashlib.sha256(body)
    digest.update(json.dumps([title, sorted(metadata.items()), sorted(groups)], ensure_ascii=False).encode())
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
