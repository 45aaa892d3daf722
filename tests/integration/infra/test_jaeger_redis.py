"""The real Jaeger (OTLP in, query API out) and Redis."""

import time
import uuid

import httpx
import redis
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.integration.conftest import JAEGER, _require


def test_a_span_exported_over_otlp_is_found_in_jaeger():
    _require(4317, "Jaeger's OTLP receiver")
    service = f"ragline-infra-test-{uuid.uuid4().hex[:8]}"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint="http://127.0.0.1:4317", insecure=True)))
    with provider.get_tracer("infra-test").start_as_current_span("infra-check") as span:
        span.set_attribute("ragline.check", "jaeger")
        trace_id = format(span.get_span_context().trace_id, "032x")
    provider.shutdown()
    deadline = time.monotonic() + 15
    found = []
    while time.monotonic() < deadline and not found:
        resp = httpx.get(f"{JAEGER}/api/traces", params={"service": service, "limit": 5}, timeout=5)
        assert resp.status_code == 200
        found = resp.json()["data"]
        if not found:
            time.sleep(0.5)
    assert found, f"no trace for {service} in Jaeger"
    assert found[0]["traceID"] == trace_id
    assert found[0]["spans"][0]["operationName"] == "infra-check"


def test_redis_set_and_get():
    _require(6379, "Redis")
    client = redis.Redis(host="127.0.0.1", port=6379)
    key = f"ragline:test:{uuid.uuid4().hex}"
    client.set(key, "值 value", ex=60)
    assert client.get(key).decode() == "值 value"
    client.delete(key)
