"""`ragline sync`: a folder and a tenant's index kept in step (added, replaced, deleted, unchanged skipped), a dry run
that changes nothing, documents from elsewhere never touched, and a sync killed at any moment that, run again,
ends with exactly the objects in Weaviate that an uninterrupted sync makes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import httpx
import pytest

from ragline.dev import office_files as make
from ragline.v1 import retrieval_pb2, retrieval_pb2_grpc
from tests.integration.conftest import GATEWAY_HTTP, RETRIEVAL, weaviate_snapshot

TENANT = "tests_sync"


def _ragline(*args: str, key: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragline.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "RAGLINE_API_KEY": key})


def _reset() -> None:
    with grpc.insecure_channel(RETRIEVAL) as channel:
        retrieval_pb2_grpc.RetrievalServiceStub(channel).DeleteTenant(retrieval_pb2.DeleteTenantRequest(tenant=TENANT), timeout=60)


def _snapshot() -> dict[str, dict[str, tuple]]:
    return weaviate_snapshot(TENANT)


def _folder(root: Path, reports: int = 40) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(reports):
        (root / f"report-{i:02d}.md").write_text(f"# Report {i}\n\nService {i} answered {i * 7} requests per second.\n", encoding="utf-8")
    (root / "manual.pdf").write_bytes(make.pdf([[("p", "备份保留十四天。")], [("p", "Restores are rehearsed every quarter.")]]))
    (root / "sub").mkdir(exist_ok=True)
    (root / "sub" / "release.docx").write_bytes(make.docx([("h1", "Release"), ("p", "Canary at five percent.")]))
    return root


@pytest.fixture
def key(api_keys: dict[str, str]) -> str:
    _reset()
    return api_keys[TENANT]


def test_sync_adds_replaces_and_deletes_and_leaves_other_documents_alone(tmp_path, key):
    outside = httpx.post(f"{GATEWAY_HTTP}/v1/documents", headers={"Authorization": f"Bearer {key}"}, timeout=120,
                         json={"documents": [{"id": "report-05.md", "text": "Ingested by hand, not by the sync."},
                                             {"id": "elsewhere", "text": "A document from another source."}]})
    assert outside.status_code == 200
    folder = _folder(tmp_path / "docs", reports=3)
    first = _ragline("sync", str(folder), key=key)
    assert first.returncode == 0, first.stderr
    assert "5 new, 0 changed, 0 unchanged, 0 gone" in first.stdout
    state = _snapshot()

    again = _ragline("sync", str(folder), key=key)
    assert "0 new, 0 changed, 5 unchanged, 0 gone" in again.stdout and _snapshot() == state

    (folder / "report-00.md").write_text("# Report 0\n\nService 0 was retired in June.\n", encoding="utf-8")
    (folder / "report-01.md").unlink()
    (folder / "report-09.md").write_text("# Report 9\n\nA new service.\n", encoding="utf-8")
    dry = _ragline("sync", str(folder), "--dry-run", key=key)
    assert "1 new, 1 changed, 3 unchanged, 1 gone" in dry.stdout
    assert "  add report-09.md" in dry.stdout and "  replace report-00.md" in dry.stdout and "  delete report-01.md" in dry.stdout
    assert _snapshot() == state

    done = _ragline("sync", str(folder), key=key)
    assert done.returncode == 0, done.stderr
    listed = httpx.get(f"{GATEWAY_HTTP}/v1/documents", headers={"Authorization": f"Bearer {key}"}, timeout=60).json()["documents"]
    by_id = {d["id"]: d for d in listed}
    assert set(by_id) == {"elsewhere", "report-05.md", "manual.pdf", "report-00.md", "report-02.md", "report-09.md", "sub/release.docx"}
    # Ingested by hand under an id the folder does not have (any more): never deleted by the folder's sync.
    assert by_id["report-00.md"]["sync_root"] == str(folder.resolve()) and by_id["report-05.md"]["sync_root"] == ""
    answer = httpx.post(f"{GATEWAY_HTTP}/v1/answer", headers={"Authorization": f"Bearer {key}"}, timeout=60,
                        json={"query": "When was service 0 retired?", "strategy": "standard"}).json()
    assert "June" in answer["text"], answer


def test_a_sync_killed_at_any_moment_and_run_again_ends_with_the_same_objects(tmp_path, key):
    folder = _folder(tmp_path / "docs")
    assert _ragline("sync", str(folder), key=key).returncode == 0
    clean = _snapshot()
    assert len(clean["RaglineChunkDocument"]) == 42
    _reset()
    for delay in (0.2, 0.6, 1.0, 1.6):
        proc = subprocess.Popen([sys.executable, "-m", "ragline.cli", "sync", str(folder)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env={**os.environ, "RAGLINE_API_KEY": key})
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    final = _ragline("sync", str(folder), key=key)
    assert final.returncode == 0, final.stderr
    assert _snapshot() == clean


def test_the_same_sync_through_the_http_api(key):
    headers = {"Authorization": f"Bearer {key}"}
    pdf = make.pdf([[("p", "The archive is kept for seven years.")]])

    def sync(files: list[tuple[str, bytes]], dry_run: bool = False) -> dict:
        resp = httpx.post(f"{GATEWAY_HTTP}/v1/documents:sync", headers=headers, timeout=120,
                          data={"sync_root": "share/policies", "dry_run": str(dry_run).lower()},
                          files=[("files", f) for f in files])
        assert resp.status_code == 200, resp.text
        return resp.json()

    httpx.post(f"{GATEWAY_HTTP}/v1/documents", headers=headers, timeout=60,
               json={"documents": [{"id": "by-hand", "text": "Not from the share."}]}).raise_for_status()
    assert sync([("archive.pdf", pdf), ("leave.md", b"# Leave\n\nTwenty days a year.\n")], dry_run=True)["added"] == ["archive.pdf", "leave.md"]
    assert httpx.get(f"{GATEWAY_HTTP}/v1/documents/archive.pdf", headers=headers, timeout=60).status_code == 404
    first = sync([("archive.pdf", pdf), ("leave.md", b"# Leave\n\nTwenty days a year.\n")])
    assert first["added"] == ["archive.pdf", "leave.md"] and first["documents_failed"] == 0
    second = sync([("archive.pdf", pdf), ("travel.md", b"# Travel\n\nBook through the portal.\n")])
    assert (second["added"], second["unchanged"], second["deleted"]) == (["travel.md"], ["archive.pdf"], ["leave.md"])
    ids = {d["id"] for d in httpx.get(f"{GATEWAY_HTTP}/v1/documents", headers=headers, timeout=60).json()["documents"]}
    assert ids == {"archive.pdf", "travel.md", "by-hand"}
