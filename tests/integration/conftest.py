"""Fixtures for tests against the real processes that `make test` starts (Weaviate, Jaeger, Redis, the mesh)."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import httpx
import pytest

from ragline.dev.processes import grpc_serving, port_open, spawn_module, stop_process
from ragline.runtime.config import DEFAULT_PORTS
from ragline.v1 import retrieval_pb2, retrieval_pb2_grpc

GATEWAY_HTTP = "http://127.0.0.1:8000"
GATEWAY_GRPC = "127.0.0.1:50060"
JAEGER = "http://127.0.0.1:16686"
RETRIEVAL = "127.0.0.1:50062"
CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"


def _keys() -> dict[str, str]:
    raw = os.environ.get("RAGLINE_API_KEYS", "")
    return dict(p.split(":", 1) for p in raw.split(",") if ":" in p)


def _require(port: int, what: str) -> None:
    if not port_open(port):
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


@pytest.fixture(scope="module")
def corpus_ingested(gateway: httpx.Client) -> dict:
    """The demo corpus (examples/corpus) in tenant tests_a, and nothing else."""
    # Start from an empty tenant: on a reused development stack, documents left by manual runs would change
    # what these tests retrieve.
    with grpc.insecure_channel(f"127.0.0.1:{DEFAULT_PORTS['retrieval']}") as channel:
        retrieval_pb2_grpc.RetrievalServiceStub(channel).DeleteTenant(
            retrieval_pb2.DeleteTenantRequest(tenant="tests_a"), timeout=60)
    docs = [{"id": p.name, "title": p.stem, "text": p.read_text(encoding="utf-8"), "metadata": {"path": p.name}}
            for p in sorted(CORPUS.glob("*.md"))]
    resp = gateway.post("/v1/documents", json={"documents": docs})
    assert resp.status_code == 200, resp.text
    return resp.json()


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


@contextmanager
def spawn(module: str, port: int, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """Run one extra ragline service process for a test, and stop it afterwards."""
    proc = spawn_module(module, env, grpc_serving(port), f"test-{module.replace('.', '-')}-{port}")
    try:
        yield proc
    finally:
        stop_process(proc)


def private_weaviate(data: Path, http_port: int, grpc_port: int, name: str = "recovery") -> subprocess.Popen[bytes]:
    """A Weaviate of a test's own, configured as `make up`'s, on other ports: for tests that kill it. Stop it with
    os.killpg(proc.pid, signal.SIGKILL)."""
    from ragline.dev.processes import http_ok
    from ragline.dev.stack import ROOT, components

    spec = next(c for c in components() if c.name == "weaviate")
    env = {**os.environ, **spec.env, "PERSISTENCE_DATA_PATH": str(data), "GRPC_PORT": str(grpc_port),
           "CLUSTER_GOSSIP_BIND_PORT": "7956", "CLUSTER_DATA_BIND_PORT": "7957", "RAFT_PORT": "8310",
           "RAFT_INTERNAL_RPC_PORT": "8311", "PROMETHEUS_MONITORING_ENABLED": "false", "CLUSTER_HOSTNAME": "ragline-test-node"}
    argv = [str(ROOT / "bin" / "weaviate-server"), "--scheme", "http", "--host", "127.0.0.1", "--port", str(http_port)]
    log = open(ROOT / ".run" / "logs" / f"test-weaviate-{name}.log", "ab")  # noqa: SIM115 - the process keeps it
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    ready = http_ok(f"http://127.0.0.1:{http_port}/v1/.well-known/ready")
    deadline = time.monotonic() + 90
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the test's Weaviate did not start: read .run/logs/test-weaviate-{name}.log")
        time.sleep(0.2)
    return proc


def jaeger_trace(trace_id: str, expect_services: set[str], timeout_s: float = 20,
                 expect_operations: frozenset[str] = frozenset()) -> dict:
    """Poll Jaeger until the trace holds spans from every expected service (and every expected operation:
    each process exports its spans in its own batches, so a trace fills in over a second or two)."""
    deadline = time.monotonic() + timeout_s
    data: dict = {}
    while time.monotonic() < deadline:
        resp = httpx.get(f"{JAEGER}/api/traces/{trace_id}", timeout=5)
        if resp.status_code == 200 and resp.json().get("data"):
            data = resp.json()["data"][0]
            services = {p["serviceName"] for p in data["processes"].values()}
            operations = {s["operationName"] for s in data["spans"]}
            if expect_services <= services and expect_operations <= operations:
                return data
        time.sleep(0.5)
    return data


def trace_services(data: dict) -> set[str]:
    return {p["serviceName"] for p in data.get("processes", {}).values()}


def weaviate_snapshot(tenant: str, collections: tuple[str, ...] = ("RaglineChunk", "RaglineChunkDocument")) -> dict[str, dict[str, tuple]]:
    """Every object of a tenant in Weaviate, chunks and catalog records: uuid -> properties (but the update time) and
    a digest of the vector. Two equal snapshots hold exactly the same objects."""
    import hashlib

    import weaviate

    client = weaviate.connect_to_local(port=8080, grpc_port=50051)
    try:
        out: dict[str, dict[str, tuple]] = {}
        for name in collections:
            coll = client.collections.use(name)
            objects = {}
            if tenant in coll.tenants.get_by_names([tenant]):
                for obj in coll.with_tenant(tenant).iterator(include_vector=True):
                    props = tuple(sorted((k, str(v)) for k, v in obj.properties.items() if k != "updated_at"))
                    vector = (obj.vector or {}).get("default")
                    digest = hashlib.sha1(str([round(x, 5) for x in vector]).encode()).hexdigest() if vector else ""
                    objects[str(obj.uuid)] = (props, digest)
            out[name] = objects
        return out
    finally:
        client.close()
