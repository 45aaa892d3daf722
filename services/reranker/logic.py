"""Reranking models behind one interface."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Protocol

import numpy as np

from services.reranker.features import NAMES, Candidate, featurize

DEFAULT_MODEL = Path(__file__).resolve().parent / "models" / "features-lr.json"


class Scorer(Protocol):
    name: str

    def score(self, query: str, candidates: list[Candidate]) -> list[float]: ...

    def probability(self, score: float) -> float | None:
        """P(relevant) for a score, or None when the model is not calibrated."""
        ...


class LearnedScorer:
    """A pairwise logistic-regression ranker over retrieval signals and query-passage overlap features,
    trained by `make train-reranker` on public question sets (see the model file for its provenance)."""

    def __init__(self, path: Path) -> None:
        model = json.loads(path.read_text(encoding="utf-8"))
        if tuple(model["features"]) != NAMES:
            raise ValueError(f"{path} was trained on features {model['features']}, this code computes {list(NAMES)}")
        self.mean = np.asarray(model["mean"])
        self.std = np.asarray(model["std"])
        self.weights = np.asarray(model["weights"])
        self.calibration = model.get("calibration")
        self.name = f"learned/{path.stem}"

    def score(self, query: str, candidates: list[Candidate]) -> list[float]:
        if not candidates:
            return []
        x = (featurize(query, candidates) - self.mean) / self.std
        return [float(v) for v in x @ self.weights]

    def probability(self, score: float) -> float | None:
        if not self.calibration:
            return None
        return 1.0 / (1.0 + math.exp(-(self.calibration["a"] * score + self.calibration["b"])))


class CrossEncoderScorer:
    """A sentence-transformers CrossEncoder by Hugging Face id or local path."""

    def __init__(self, model: str, max_length: int, batch_size: int) -> None:
        from sentence_transformers import CrossEncoder

        self._model = CrossEncoder(model, max_length=max_length, device="cpu")
        self.batch_size = batch_size
        self.name = f"cross-encoder/{model}"

    def score(self, query: str, candidates: list[Candidate]) -> list[float]:
        pairs = [(query, f"{c.title}\n{c.text}") for c in candidates]
        return [float(s) for s in self._model.predict(pairs, batch_size=self.batch_size)]

    def probability(self, score: float) -> float | None:
        return None  # cross-encoders' raw scores vary by model; calibrate one before thresholding it


def load_scorer(spec: str, max_length: int, batch_size: int) -> Scorer:
    if spec == "learned":
        return LearnedScorer(DEFAULT_MODEL)
    if spec.startswith("learned:"):
        return LearnedScorer(Path(spec.split(":", 1)[1]))
    if spec.startswith("cross-encoder:"):
        return CrossEncoderScorer(spec.split(":", 1)[1], max_length, batch_size)
    raise ValueError(f"unknown reranker model {spec!r}: use 'learned', 'learned:<path>' or 'cross-encoder:<model>'")
