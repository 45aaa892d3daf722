"""Fixtures for tests against the real processes that `make test` starts (Weaviate, Jaeger, Redis, the mesh)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
GATEWAY_HTTP = "http://127.0.0.1:8000"
GATEWAY_GRPC = "127.0.0.1:50060"
JAEGER = "http://127.0.0.1:16686"
RETRIEVAL = "127.0.0.1:50062"


def _keys() -> dict[str, str]:
    raw = os.environ.get("RAGLINE_API_KEYS", "")
    return dict(p.split(":", 1) for p in raw.split(",") if ":" in p)


def _require(port: int, what: str) -> None:
    with socket.socket() as sock:
        sock.settimeout(1)
        if sock.connect_ex(("127.0.0.1", port)) != 0:
            pytest.fail(f"{what} is not running on 127.0.0.1:{port}: run the tests with `make test`")


@pytest.fixture(scope="session")
def api_keys() -> dict[str, str]:
    """Tenant -> key for the test tenants (RAGLINE_API_KEYS as set by scripts/test.sh)."""
    keys = {tenant: key for key, tenant in _keys().items()}
    if not {"tests_a", "tests_b", "tests_c"} <= set(keys):
        pytest.fail("RAGLINE_API_KEYS must map keys to tenants tests_a, tests_b and tests_c: run the tests with `make test`")
    return keys


@pytest.fixture(scope="session")
def gateway(api_keys: dict[str, str]) -> Iterator[httpx.Client]:
    _require(8000, "the gateway")
    with httpx.Client(base_url=GATEWAY_HTTP, timeout=60, headers={"Authorization": f"Bearer {api_keys['tests_a']}"}) as client:
        yield client


@pytest.fixture(scope="session")
def tenant_c_corpus(api_keys: dict[str, str]) -> None:
    """One small document in tenant tests_c, so those tests never depend on what other tests ingested."""
    doc = {"id": "pools", "title": "HikariCP defaults",
           "text": "HikariCP is the default pool of Spring Boot. Its default maximumPoolSize is 10 connections."}
    resp = httpx.post(f"{GATEWAY_HTTP}/v1/documents", json={"documents": [doc]}, timeout=120,
                      headers={"Authorization": f"Bearer {api_keys['tests_c']}"})
    assert resp.status_code == 200, resp.text


@pytest.fixture(scope="session")
def retrieval_channel() -> Iterator[grpc.Channel]:
    _require(50062, "the retrieval service")
    with grpc.insecure_channel(RETRIEVAL, options=[("grpc.max_send_message_length", 64 << 20)]) as channel:
        yield channel


@pytest.fixture
def tenant() -> str:
    """A fresh tenant name for tests that talk to the retrieval service directly."""
    return f"t_{uuid.uuid4().hex[:12]}"


def wait_serving(port: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                if health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=1).status == 1:
                    return
        except grpc.RpcError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"nothing serving on port {port} after {timeout_s}s")


@contextmanager
def spawn(module: str, port: int, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """Run one extra ragline service process for a test, and stop it afterwards."""
    log_dir = ROOT / ".run" / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"test-{module.replace('.', '-')}-{port}.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", module], cwd=ROOT, env={**os.environ, **env},
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_serving(port)
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


def jaeger_trace(trace_id: str, expect_services: set[str], timeout_s: float = 20) -> dict:
    """Poll Jaeger until the trace holds spans from every expected service."""
    deadline = time.monotonic() + timeout_s
    data: dict = {}
    while time.monotonic() < deadline:
        resp = httpx.get(f"{JAEGER}/api/traces/{trace_id}", timeout=5)
        if resp.status_code == 200 and resp.json().get("data"):
            data = resp.json()["data"][0]
            services = {p["serviceName"] for p in data["processes"].values()}
            if expect_services <= services:
                return data
        time.sleep(0.5)
    return data


def trace_services(data: dict) -> set[str]:
    return {p["serviceName"] for p in data.get("processes", {}).values()}
