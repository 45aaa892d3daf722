"""Read documents for ingestion: files and folders, or a JSONL stream of {id, title, text, metadata}."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".html", ".htm", ".py", ".go", ".js", ".ts", ".java", ".rs", ".c", ".cc", ".cpp", ".h", ".rst"}


@dataclass
class RawDocument:
    id: str
    title: str
    text: str
    source: str = ""
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass
class LoadError:
    where: str
    message: str


def _title_of(path: Path, text: str) -> str:
    for line in text.splitlines()[:20]:
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem.replace("_", " ").replace("-", " ")


def load_files(root: Path) -> Iterator[RawDocument | LoadError]:
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    for path in paths:
        rel = str(path.relative_to(root.parent if root.is_file() else root))
        try:
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
            meta = rec.get("metadata") or {}
            if not isinstance(meta, dict):
                raise ValueError("'metadata' must be an object")
            yield RawDocument(id=str(rec["id"]), title=str(rec.get("title", "")), text=str(rec["text"]),
                              source=str(rec.get("source", where)), metadata={str(k): str(v) for k, v in meta.items()})
        except (ValueError, json.JSONDecodeError) as exc:
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
