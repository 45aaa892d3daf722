"""OpenTelemetry set-up: OTLP export to Jaeger and gRPC instrumentation on both sides."""

from __future__ import annotations

import os
import socket

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.grpc import (
    GrpcAioInstrumentorClient,
    GrpcAioInstrumentorServer,
    GrpcInstrumentorClient,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from ragline.runtime.config import RuntimeSettings

_provider: TracerProvider | None = None


def setup_tracing(service: str, settings: RuntimeSettings) -> TracerProvider:
    """Install the tracer provider once per process; instrument gRPC servers and clients."""
    global _provider
    if _provider is not None:
        return _provider
    sampler = ParentBased(TraceIdRatioBased(settings.trace_sample_ratio if settings.tracing else 0.0))
    resource = Resource.create({
        "service.name": f"ragline-{service}",
        # Tells replicas of one stage apart in Jaeger.
        "service.instance.id": f"{socket.gethostname()}-{os.getpid()}",
    })
    provider = TracerProvider(resource=resource, sampler=sampler)
    if settings.tracing:
        # The exporter's own calls must not be traced, so it is created before instrumentation.
        provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=settings.otlp_endpoint, insecure=True),
            schedule_delay_millis=settings.trace_export_delay_ms,
        ))
    trace.set_tracer_provider(provider)
    GrpcAioInstrumentorServer().instrument()
    GrpcAioInstrumentorClient().instrument()
    # The Weaviate client talks gRPC through sync channels too.
    GrpcInstrumentorClient().instrument()
    _provider = provider
    return provider


def shutdown_tracing() -> None:
    if _provider is not None:
        _provider.shutdown()


def current_trace_id() -> str:
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else ""
