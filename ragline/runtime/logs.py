"""Structured JSON logs that carry the current trace and span ids."""

from __future__ import annotations

import logging
import sys

from opentelemetry import trace
from pythonjsonlogger.json import JsonFormatter


class _TraceContextFilter(logging.Filter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = trace.get_current_span().get_span_context()
        record.service = self.service
        record.trace_id = format(ctx.trace_id, "032x") if ctx.is_valid else ""
        record.span_id = format(ctx.span_id, "016x") if ctx.is_valid else ""
        return True


def setup_logging(service: str, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_TraceContextFilter(service))
    handler.setFormatter(
        JsonFormatter(
            "{asctime}{levelname}{name}{message}{service}{trace_id}{span_id}",
            style="{",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The HTTP client of the Weaviate and OpenAI libraries logs every request at INFO.
    logging.getLogger("httpx").setLevel(logging.WARNING)
