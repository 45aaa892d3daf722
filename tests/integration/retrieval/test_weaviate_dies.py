"""Ingestion while Weaviate dies: a Weaviate killed (SIGKILL) in the middle of a batch gives each document that was not
written its own error, and the call returns within a bound instead of hanging; started again, the same batch goes in
whole. On a Weaviate and a retrieval of the test's own: the shared ones are left alone."""

from __future__ import annotations

import os
import signal
import threading
import time

import grpc

from ragline.v1 import retrieval_pb2, retrieval_pb2_grpc
from tests.integration.conftest import private_weaviate, spawn

PORT, WEAVIATE_HTTP, WEAVIATE_GRPC = 50203, 8182, 50204
TENANT = "tests_weaviate_dies"
# Written a few documents at a time, so that the kill can land between two writes.
ENV = {"RAGLINE_RETRIEVAL_PORT": str(PORT), "RAGLINE_RETRIEVAL_WEAVIATE_TIMEOUT_S": "5", "RAGLINE_RETRIEVAL_WRITE_BATCH_CHUNKS": "6",
       "RAGLINE_RETRIEVAL_WEAVIATE_HTTP_PORT": str(WEAVIATE_HTTP), "RAGLINE_RETRIEVAL_WEAVIATE_GRPC_PORT": str(WEAVIATE_GRPC)}
# One Weaviate timeout for the document being written when it died, then the rest fail at once.
RETURNS_WITHIN_S = 20


def _batch(stamp: int) -> list[retrieval_pb2.Document]:
    return [retrieval_pb2.Document(id=f"runbook-{i:02d}.md", title=f"Runbook {i}", text=(
        f"# Runbook {i} ({stamp})\n\n" + " ".join(f"Step {j}: restart worker {i}-{j} and check its queue depth." for j in range(40))))
        for i in range(24)]


def test_a_weaviate_killed_mid_batch_fails_the_unwritten_documents_one_by_one_without_hanging(tmp_path):
    weaviate = private_weaviate(tmp_path / "weaviate", WEAVIATE_HTTP, WEAVIATE_GRPC, "dies")
    # A vector cache of the test's own, filled by a first tenant: the second tenant's batch is then all writes, so
    # that the kill lands among them.
    env = {**ENV, "RAGLINE_RETRIEVAL_EMBED_CACHE": str(tmp_path / "vectors.sqlite")}
    try:
        with spawn("services.retrieval", PORT, env), grpc.insecure_channel(f"127.0.0.1:{PORT}") as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            batch = _batch(int(time.time()))
            warm = stub.Ingest(retrieval_pb2.IngestRequest(tenant=TENANT + "_warm", documents=batch), timeout=300)
            assert warm.documents_failed == 0
            outcome: dict[str, object] = {}

            def ingest() -> None:
                started = time.monotonic()
                try:
                    outcome["response"] = stub.Ingest(retrieval_pb2.IngestRequest(tenant=TENANT, documents=batch), timeout=300)
                except grpc.RpcError as exc:
                    outcome["error"] = exc
                outcome["seconds"] = time.monotonic() - started

            worker = threading.Thread(target=ingest, daemon=True)
            worker.start()
            while "response" not in outcome and "error" not in outcome:  # killed once a few documents are in
                listed = stub.ListIndexedDocuments(retrieval_pb2.ListIndexedDocumentsRequest(tenant=TENANT, page_size=100), timeout=10)
                if len(listed.documents) >= 3:
                    break
                time.sleep(0.01)
            os.killpg(weaviate.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            weaviate.wait(10)
            worker.join(RETURNS_WITHIN_S)
            assert not worker.is_alive(), f"Ingest still running {RETURNS_WITHIN_S} s after Weaviate died"
            print(f"Ingest returned {time.monotonic() - killed_at:.1f} s after the kill")
            if "error" in outcome:
                # Killed before the batch reached Weaviate's first call: the whole call fails, with a status.
                code = outcome["error"].code()  # type: ignore[attr-defined]
                assert code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL), code
            else:
                resp = outcome["response"]
                failed = [r for r in resp.results if r.error]  # type: ignore[attr-defined]
                assert failed, "every document claims to be written into a dead Weaviate"
                assert len(failed) < len(batch), "killed before the first write: not mid-batch"
                print(f"{len(batch) - len(failed)} written, {len(failed)} failed, e.g. {failed[-1].error!r}")
                assert all(r.document_id and r.error for r in failed)
                assert len(resp.results) == len(batch)  # type: ignore[attr-defined]

            weaviate = private_weaviate(tmp_path / "weaviate", WEAVIATE_HTTP, WEAVIATE_GRPC, "dies")
            deadline = time.monotonic() + 30
            while True:  # retrieval reconnects on its own
                try:
                    resp = stub.Ingest(retrieval_pb2.IngestRequest(tenant=TENANT, documents=batch), timeout=300)
                    break
                except grpc.RpcError:
                    assert time.monotonic() < deadline, "retrieval did not reconnect to Weaviate"
                    time.sleep(0.5)
            assert resp.documents_failed == 0, [r.error for r in resp.results if r.error]
            listed = stub.ListIndexedDocuments(retrieval_pb2.ListIndexedDocumentsRequest(tenant=TENANT, page_size=100), timeout=30)
            assert sorted(d.id for d in listed.documents) == sorted(d.id for d in batch)
    finally:
        if weaviate.poll() is None:
            os.killpg(weaviate.pid, signal.SIGKILL)
