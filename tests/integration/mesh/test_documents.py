"""Real documents through the running mesh: files uploaded over HTTP (multipart, and as a job), a PDF page cited
over HTTP, gRPC and the CLI, documents listed, read and deleted (and the answer cache with them), and bad files
failing alone while the rest of the batch goes in."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import grpc
import httpx
import pytest

from ragline.dev import office_files as make
from ragline.v1 import common_pb2, ragline_pb2, ragline_pb2_grpc, retrieval_pb2, retrieval_pb2_grpc
from tests.integration.conftest import GATEWAY_GRPC, GATEWAY_HTTP, RETRIEVAL

TENANT = "tests_docs"
MANUAL = make.pdf([
    [("h1", "Storage operations manual"), ("p", "This manual covers the object store used by the backup jobs.")],
    [("h2", "Retention"), ("p", "Snapshots of the object store are kept for nineteen days and then expire.")],
], title="Storage operations manual")
GUIDE = make.docx([("h1", "部署"), ("p", "使用 helm install 部署服务，等待所有 Pod 就绪。"),
                   ("h2", "回滚"), ("p", "执行 helm rollback 回到上一个版本，回滚大约需要四十秒。")], title="部署指南")
DECK = make.pptx([("Quarterly goals", "Cut the p99 latency of search to 300 ms"), ("Risks", "The GPU budget is not approved")])
SHEET = make.xlsx({"Owners": [["service", "owner"], ["billing", "Mariana"], ["search", "Tomasz"]]})


@pytest.fixture(scope="module")
def client(api_keys: dict[str, str]) -> httpx.Client:
    with grpc.insecure_channel(RETRIEVAL) as channel:
        retrieval_pb2_grpc.RetrievalServiceStub(channel).DeleteTenant(retrieval_pb2.DeleteTenantRequest(tenant=TENANT), timeout=60)
    with httpx.Client(base_url=GATEWAY_HTTP, timeout=120, headers={"Authorization": f"Bearer {api_keys[TENANT]}"}) as c:
        yield c


@pytest.fixture(scope="module")
def uploaded(client: httpx.Client) -> dict:
    files = [("files", ("manual.pdf", MANUAL)), ("files", ("guides/deploy.docx", GUIDE)), ("files", ("goals.pptx", DECK)),
             ("files", ("owners.xlsx", SHEET)), ("files", ("notes.md", b"# Notes\n\nThe on-call rota changes on Mondays.\n")),
             ("files", ("broken.pdf", b"%PDF-1.7 truncated")), ("files", ("scan.pdf", make.scanned_pdf())),
             ("files", ("empty.docx", b"")), ("files", ("photo.jpg", b"\xff\xd8\xff")),
             ("files", ("locked.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600))]
    resp = client.post("/v1/documents", files=files)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_an_upload_of_mixed_files_ingests_the_good_ones_and_names_each_bad_one(uploaded):
    by_id = {r["id"]: r for r in uploaded["results"]}
    assert {i for i, r in by_id.items() if "error" not in r} == {"manual.pdf", "guides/deploy.docx", "goals.pptx", "owners.xlsx", "notes.md"}
    assert all(by_id[i]["chunks"] >= 1 for i in ("manual.pdf", "guides/deploy.docx", "goals.pptx", "owners.xlsx", "notes.md"))
    assert by_id["broken.pdf"]["error"].startswith("cannot read this PDF file (corrupt or truncated?)")
    assert by_id["scan.pdf"]["error"] == "no text layer: scanned PDF?"
    assert by_id["empty.docx"]["error"].startswith("empty document")
    assert by_id["photo.jpg"]["error"].startswith("unsupported format .jpg")
    assert by_id["locked.docx"]["error"].startswith("password-protected or legacy (pre-2007) Office file")
    assert uploaded["documents_failed"] == 5


def test_an_answer_from_a_pdf_page_cites_the_page_over_http_grpc_and_the_cli(client, uploaded, api_keys):
    question = "How long are snapshots of the object store kept?"
    body = client.post("/v1/answer", json={"query": question, "strategy": "standard"}).json()
    cited = [c for c in body["citations"] if c["document_id"] == "manual.pdf"]
    assert cited and cited[0]["page"] == 2 and "nineteen days" in body["text"], body
    with grpc.insecure_channel(GATEWAY_GRPC) as channel:
        answer = ragline_pb2_grpc.RaglineServiceStub(channel).Answer(
            ragline_pb2.AnswerRequest(query=question, strategy=common_pb2.STRATEGY_STANDARD),
            metadata=[("authorization", f"Bearer {api_keys[TENANT]}")], timeout=60).answer
    assert [c.page for c in answer.citations if c.document_id == "manual.pdf"][0] == 2
    out = subprocess.run([sys.executable, "-m", "ragline.cli", "ask", question, "--strategy", "standard"], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "RAGLINE_API_KEY": api_keys[TENANT]}, check=True).stdout
    assert "(manual.pdf, p. 2)" in out, out


def test_slides_and_sheets_are_cited_by_number_and_name(client, uploaded):
    deck = client.post("/v1/answer", json={"query": "What is the quarterly goal for the p99 latency of search?", "strategy": "standard"}).json()
    assert any(c["document_id"] == "goals.pptx" and c["slide"] == 1 for c in deck["citations"]), deck
    sheet = client.post("/v1/answer", json={"query": "Who is the owner of the billing service?", "strategy": "standard"}).json()
    assert any(c["document_id"] == "owners.xlsx" and c["sheet"] == "Owners" for c in sheet["citations"]), sheet


def test_documents_are_listed_in_pages_read_one_by_one_and_never_across_tenants(client, uploaded, api_keys):
    seen, token = [], ""
    while True:
        page = client.get("/v1/documents", params={"page_size": 2, "page_token": token}).json()
        assert len(page["documents"]) <= 2 and page["truncated"] is False
        seen += page["documents"]
        token = page["next_page_token"]
        if not token:
            break
    assert [d["id"] for d in seen] == sorted(["goals.pptx", "guides/deploy.docx", "manual.pdf", "notes.md", "owners.xlsx"])
    manual = client.get("/v1/documents/manual.pdf").json()
    assert (manual["format"], manual["parts"], manual["title"], manual["access_groups"]) == ("pdf", 2, "Storage operations manual", [])
    assert len(manual["content_hash"]) == 64 and manual["chunks"] >= 1 and manual["updated_at"].endswith("Z")
    assert client.get("/v1/documents/guides/deploy.docx").json()["title"] == "部署指南"
    other = httpx.get(f"{GATEWAY_HTTP}/v1/documents/manual.pdf", headers={"Authorization": f"Bearer {api_keys['tests_b']}"})
    assert other.status_code == 404 and other.json()["error"]["code"] == "NOT_FOUND"


def test_ingesting_the_same_file_again_is_skipped_without_embedding(client, uploaded):
    again = client.post("/v1/documents", files=[("files", ("manual.pdf", MANUAL))]).json()
    assert again["results"] == [{"id": "manual.pdf", "chunks": client.get("/v1/documents/manual.pdf").json()["chunks"],
                                 "unchanged": True}] and again["chunks_written"] == 0


def test_deleting_a_document_removes_its_chunks_and_its_cached_answers(client, uploaded):
    question = {"query": "When does the on-call rota change?", "strategy": "standard"}
    first = client.post("/v1/answer", json=question).json()
    assert "Mondays" in first["text"] and client.post("/v1/answer", json=question).json()["cached"] is True
    resp = client.delete("/v1/documents/notes.md")
    assert resp.status_code == 200 and resp.json()["chunks_deleted"] >= 1
    after = client.post("/v1/answer", json=question).json()
    assert after["cached"] is False and "notes.md" not in after["retrieved_documents"]
    assert client.get("/v1/documents/notes.md").status_code == 404
    assert client.delete("/v1/documents/notes.md").status_code == 404


def test_a_large_upload_becomes_a_job_whose_progress_and_results_can_be_read(client, api_keys):
    files = [("files", (f"batch/report-{i}.md", f"# Report {i}\n\nReport {i} says the error budget is {i} percent.\n".encode()))
             for i in range(20)]
    resp = client.post("/v1/documents", files=files, headers={"Prefer": "respond-async"})
    assert resp.status_code == 202, resp.text
    job = resp.json()["job"]
    assert resp.headers["location"] == f"/v1/jobs/{job['id']}" and job["documents_total"] == 20
    deadline = time.monotonic() + 120
    while job["status"] == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
        job = client.get(f"/v1/jobs/{job['id']}").json()
        assert 0 <= job["documents_done"] <= 20
    assert job["status"] == "done" and job["documents_done"] == 20 and job["documents_failed"] == 0
    assert sorted(r["id"] for r in job["results"]) == sorted(f"batch/report-{i}.md" for i in range(20))
    other = httpx.get(f"{GATEWAY_HTTP}/v1/jobs/{job['id']}", headers={"Authorization": f"Bearer {api_keys['tests_b']}"})
    assert other.status_code == 404


def test_grpc_lists_gets_and_deletes_documents(uploaded, api_keys):
    meta = [("authorization", f"Bearer {api_keys[TENANT]}")]
    with grpc.insecure_channel(GATEWAY_GRPC) as channel:
        stub = ragline_pb2_grpc.RaglineServiceStub(channel)
        listed = stub.ListDocuments(ragline_pb2.ListDocumentsRequest(page_size=1000), metadata=meta, timeout=30)
        assert "goals.pptx" in {d.id for d in listed.documents}
        assert stub.GetDocument(ragline_pb2.GetDocumentRequest(document_id="goals.pptx"), metadata=meta, timeout=30).document.parts == 2
        with pytest.raises(grpc.RpcError) as missing:
            stub.GetDocument(ragline_pb2.GetDocumentRequest(document_id="no-such-doc"), metadata=meta, timeout=30)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as bad_token:
            stub.ListDocuments(ragline_pb2.ListDocumentsRequest(page_token="not-a-token"), metadata=meta, timeout=30)
        assert bad_token.value.code() == grpc.StatusCode.INVALID_ARGUMENT
