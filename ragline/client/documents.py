"""Read documents for ingestion: files and folders of mixed formats, or a JSONL stream of {id, title, text,
metadata}. Text files are sent as text; PDF and Office files as their bytes, which retrieval's parsers read."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ragline.domain.access import InvalidGroups, split_groups
from ragline.domain.documents import BINARY_FORMATS, content_hash, format_of, unsupported
from ragline.v1 import retrieval_pb2


@dataclass
class RawDocument:
    id: str
    title: str
    text: str
    source: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    content: bytes = b""
    access_groups: list[str] = field(default_factory=list)
    sync_root: str = ""

    def message(self) -> retrieval_pb2.Document:
        return retrieval_pb2.Document(id=self.id, title=self.title, text=self.text, source=self.source, metadata=self.metadata,
                                      content=self.content, access_groups=self.access_groups, sync_root=self.sync_root)

    def content_hash(self) -> str:
        """The hash retrieval will store for this document (ragline/domain/documents.py)."""
        return content_hash(self.message())

    def size(self) -> int:
        return len(self.content) + len(self.text)


@dataclass
class LoadError:
    where: str
    message: str


def _title_of(path: Path, text: str) -> str:
    for line in text.splitlines()[:20]:
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem.replace("_", " ").replace("-", " ")


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def load_files(root: Path) -> Iterator[RawDocument | LoadError]:
    """Every file under root (or root itself): hidden files and folders are passed over, a file of a format
    ragline does not read is reported, never silently dropped."""
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and not _hidden(p, root))
    for path in paths:
        rel = str(path.relative_to(root.parent if root.is_file() else root))
        fmt = format_of(path.name)
        if not fmt:
            yield LoadError(rel, unsupported(path.name))
            continue
        try:
            if path.suffix.lower() in BINARY_FORMATS:
                yield RawDocument(id=rel, title="", text="", source=rel, metadata={"path": rel}, content=path.read_bytes())
                continue
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError) as exc:
            yield LoadError(rel, f"cannot read as UTF-8 text: {exc}")
            continue
        yield RawDocument(id=rel, title=_title_of(path, text), text=text, source=rel, metadata={"path": rel})


def load_jsonl(lines: Iterator[str], where: str) -> Iterator[RawDocument | LoadError]:
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise ValueError("a record must be a JSON object")
            if not str(rec.get("id", "")).strip() or not str(rec.get("text", "")).strip():
                raise ValueError("a record needs a non-empty 'id' and 'text'")
            meta = dict(rec.get("metadata") or {})
            if not isinstance(rec.get("metadata") or {}, dict):
                raise ValueError("'metadata' must be an object")
            groups = split_groups(meta.pop("access_groups", []))
            yield RawDocument(id=str(rec["id"]), title=str(rec.get("title", "")), text=str(rec["text"]),
                              source=str(rec.get("source", where)), metadata={str(k): str(v) for k, v in meta.items()},
                              access_groups=groups)
        except (ValueError, InvalidGroups, json.JSONDecodeError) as exc:
            yield LoadError(f"{where}:{n}", str(exc))


def read_documents(path: str) -> tuple[list[RawDocument], list[LoadError]]:
    """The documents at a path (a file, a folder, a .jsonl file, or '-' for JSONL on stdin) and what could not be read."""
    if path == "-":
        items = list(load_jsonl(iter(sys.stdin), "stdin"))
    elif path.endswith(".jsonl"):
        with open(path, encoding="utf-8") as fh:
            items = list(load_jsonl(iter(fh), path))
    else:
        items = list(load_files(Path(path)))
    return [d for d in items if isinstance(d, RawDocument)], [e for e in items if isinstance(e, LoadError)]
