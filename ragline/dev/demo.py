"""`make demo`: ingest the sample corpus (Markdown, a PDF and a Word file), then ask five kinds of question and
show how each was handled."""

from __future__ import annotations

from pathlib import Path

import grpc

from ragline.client import gateway_stub
from ragline.client.documents import read_documents
from ragline.client.render import print_answer
from ragline.v1 import common_pb2, ragline_pb2

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
QUESTIONS = [
    ("simple fact", "What is the default maximumPoolSize of HikariCP?"),
    ("multi-hop", "What storage does the payments service use, and why did its connection pool run out in March 2024?"),
    ("verification", "Kubernetes 存活探针失败是否一定会导致容器重启？"),
    ("unanswerable", "Redis 集群的分片数量是多少？"),
    # Only page 2 of backup-manual.pdf says it: the citation names the page.
    ("from a PDF page", "全量备份保留多少天？"),
]


def run_demo() -> int:
    stub, meta = gateway_stub()
    docs, _ = read_documents(str(CORPUS))
    request = ragline_pb2.IngestDocumentsRequest(documents=[d.message() for d in docs])
    try:
        resp = stub.IngestDocuments(request, metadata=meta, timeout=300)
    except grpc.RpcError as exc:
        print(f"error: ingest failed: {exc.code().name}: {exc.details()}")  # type: ignore[attr-defined]
        return 1
    print(f"ingested {len(docs)} documents from {CORPUS} ({resp.chunks_written} chunks)\n")
    for kind, question in QUESTIONS:
        print("=" * 100)
        print(f"[{kind}] {question}\n")
        try:
            answer = stub.Answer(ragline_pb2.AnswerRequest(query=question, strategy=common_pb2.STRATEGY_AUTO),
                                 metadata=meta, timeout=60).answer
        except grpc.RpcError as exc:
            print(f"error: {exc.code().name}: {exc.details()}")  # type: ignore[attr-defined]
            return 1
        print_answer(answer)
        print()
    print("Traces: http://127.0.0.1:16686/api/traces?service=ragline-gateway (Jaeger query API; see README)")
    return 0
