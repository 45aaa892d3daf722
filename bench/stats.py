"""Summaries of repeated measurements."""

from __future__ import annotations

import statistics

from ragline.eval.metrics import percentile


def stats(ms: list[float]) -> dict[str, float]:
    return {"p50": percentile(ms, 50), "p95": percentile(ms, 95), "p99": percentile(ms, 99), "n": len(ms)}


def spread(values: list[float]) -> tuple[float, float, float]:
    """(median, min, max) over repeated runs."""
    return statistics.median(values), min(values), max(values)


def spreads(runs: list[dict], keys: tuple[str, ...]) -> dict[str, tuple[float, float, float]]:
    """The spread of each key over the runs' summaries."""
    return {k: spread([r[k] for r in runs]) for k in keys}
