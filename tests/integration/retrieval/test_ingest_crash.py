"""Ingestion under failure: a retrieval service killed (SIGKILL) in the middle of a batched ingestion, started again
and given the same batches, ends with exactly the objects in Weaviate that an uninterrupted run makes."""

from __future__ import annotations

import threading
import time

import grpc

from ragline.dev import office_files as make
from ragline.v1 import retrieval_pb2, retrieval_pb2_grpc
from tests.integration.conftest import _require, spawn, weaviate_snapshot

PORT = 50202
TENANT = "tests_crash"
# No embedding cache: every run embeds, so the kill lands while there is work in flight.
ENV = {"RAGLINE_RETRIEVAL_PORT": str(PORT), "RAGLINE_RETRIEVAL_EMBED_CACHE": ""}


def _batches() -> list[list[retrieval_pb2.Document]]:
    docs = [retrieval_pb2.Document(id=f"note-{i:02d}.md", source=f"note-{i:02d}.md", title=f"Note {i}",
                                   text=f"# Note {i}\n\nService {i} restarts its workers every {i + 2} hours.\n")
            for i in range(36)]
    docs += [retrieval_pb2.Document(id=f"manual-{i}.pdf", source=f"manual-{i}.pdf",
                                    content=make.pdf([[("p", f"备份保留{i + 3}天。")], [("p", f"Restores take {i + 1} hours.")]]))
             for i in range(4)]
    return [docs[i : i + 5] for i in range(0, len(docs), 5)]


def _ingest_all(stub: retrieval_pb2_grpc.RetrievalServiceStub) -> None:
    for batch in _batches():
        resp = stub.Ingest(retrieval_pb2.IngestRequest(tenant=TENANT, documents=batch), timeout=300)
        assert resp.documents_failed == 0, [r.error for r in resp.results if r.error]


def _reset(stub: retrieval_pb2_grpc.RetrievalServiceStub) -> None:
    stub.DeleteTenant(retrieval_pb2.DeleteTenantRequest(tenant=TENANT), timeout=60)


def test_a_retrieval_killed_mid_ingestion_and_given_the_batches_again_ends_with_the_same_objects():
    _require(8080, "Weaviate")
    with spawn("services.retrieval", PORT, ENV), grpc.insecure_channel(f"127.0.0.1:{PORT}") as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        _reset(stub)
        started = time.monotonic()
        _ingest_all(stub)
        clean_s = time.monotonic() - started
        clean = weaviate_snapshot(TENANT)
        assert len(clean["RaglineChunkDocument"]) == 40 and len(clean["RaglineChunk"]) >= 40
        _reset(stub)

    with spawn("services.retrieval", PORT, ENV) as doomed, grpc.insecure_channel(f"127.0.0.1:{PORT}") as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        worker = threading.Thread(target=lambda: _try(_ingest_all, stub), daemon=True)
        worker.start()
        # Killed once a few batches are in, while the rest are still to come.
        deadline = time.monotonic() + 10 * clean_s + 30
        while time.monotonic() < deadline:
            listed = stub.ListIndexedDocuments(retrieval_pb2.ListIndexedDocumentsRequest(tenant=TENANT, page_size=1000), timeout=10)
            if len(listed.documents) >= 10:
                break
            time.sleep(0.02)
        doomed.kill()
        doomed.wait(10)
        worker.join(30)
    partial = weaviate_snapshot(TENANT)
    assert 0 < len(partial["RaglineChunkDocument"]) < 40, len(partial["RaglineChunkDocument"])  # killed mid-way

    with spawn("services.retrieval", PORT, ENV), grpc.insecure_channel(f"127.0.0.1:{PORT}") as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        _ingest_all(stub)
        assert weaviate_snapshot(TENANT) == clean
        _reset(stub)


def _try(fn, *args) -> None:  # type: ignore[no-untyped-def]
    try:
        fn(*args)
    except grpc.RpcError:
        pass  # the service was killed under it
