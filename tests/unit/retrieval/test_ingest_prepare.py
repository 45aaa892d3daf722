"""One document prepared for ingestion (validated, read, chunked, hashed) without Weaviate: what the client
computes for sync is what retrieval stores, and each refusal says why."""

from __future__ import annotations

import pytest

from ragline.client.documents import RawDocument, load_files
from ragline.dev import office_files as make
from ragline.domain.documents import plan_sync
from ragline.v1 import retrieval_pb2
from services.retrieval.config import RetrievalSettings
from services.retrieval.ingest import DocumentError, Ingestor


@pytest.fixture
def ingestor() -> Ingestor:
    ingestor = Ingestor(RetrievalSettings(max_file_bytes=64 * 1024), store=None, embedder=None)  # type: ignore[arg-type]
    yield ingestor
    ingestor.parsers.close()


def _timings() -> dict[str, float]:
    return dict.fromkeys(("parse", "chunk", "embed", "write"), 0.0)


async def test_the_hash_the_client_computes_is_the_one_retrieval_stores(ingestor, tmp_path):
    (tmp_path / "guide.md").write_text("# Guide\n\nRestart the pod.\n", encoding="utf-8")
    (tmp_path / "manual.pdf").write_bytes(make.pdf([[("p", "第一页。")], [("p", "Page two.")]]))
    for doc in (d for d in load_files(tmp_path) if isinstance(d, RawDocument)):
        doc.access_groups = ["ops"]
        prepared = await ingestor.prepare(doc.message(), _timings())
        assert prepared.record.content_hash == doc.content_hash()
        assert prepared.record.access_groups == ["ops"]
    pdf = await ingestor.prepare(RawDocument(id="m", title="", text="", source="manual.pdf",
                                             content=(tmp_path / "manual.pdf").read_bytes()).message(), _timings())
    assert [(c.metadata["page"], c.text) for c in pdf.chunks] == [("1", "第一页。"), ("2", "Page two.")]
    assert pdf.record.format == "pdf" and pdf.record.parts == 2 and pdf.record.title == "manual"


@pytest.mark.parametrize(("doc", "message"), [
    (retrieval_pb2.Document(id="x.bin", source="x.bin", content=b"\x00\x01"), "unsupported format .bin"),
    (retrieval_pb2.Document(id="e.md", source="e.md"), "empty document"),
    (retrieval_pb2.Document(id="big.pdf", source="big.pdf", content=b"%PDF" + b"0" * 70_000), "file of 0 MiB is over the 0 MiB limit"),
    (retrieval_pb2.Document(id="l.txt", source="l.txt", content="caf\xe9".encode("latin-1")), "not UTF-8 text"),
    (retrieval_pb2.Document(id="g", text="x", access_groups=["no spaces please"]), "bad access group"),
    (retrieval_pb2.Document(id=" ", text="x"), "document id is empty"),
])
async def test_a_document_that_cannot_be_ingested_says_why(ingestor, doc, message):
    with pytest.raises(DocumentError, match=message):
        await ingestor.prepare(doc, _timings())


def test_a_sync_plan_adds_replaces_keeps_and_deletes():
    plan = plan_sync({"new": "a", "same": "b", "edited": "c2"}, {"same": "b", "edited": "c1", "gone": "h"})
    assert (plan.add, plan.change, plan.unchanged, plan.delete) == (["new"], ["edited"], ["same"], ["gone"])


class _CountingEmbedder:
    dim = 2

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed_passages(self, texts: list[str]):
        import numpy as np

        self.seen += texts
        return np.asarray([[len(t), float(hash(t) % 97)] for t in texts], dtype=np.float32)


async def test_a_repeated_text_is_embedded_once_and_every_chunk_gets_its_vector():
    from services.retrieval.store import StoredChunk

    embedder = _CountingEmbedder()
    ingestor = Ingestor(RetrievalSettings(embed_batch=2), store=None, embedder=embedder)  # type: ignore[arg-type]
    try:
        texts = ["Footer: confidential.", "Restart the pod.", "Footer: confidential.", "Check the logs.", "Footer: confidential."]
        chunks = [StoredChunk("d", i, "Guide", t, "", {}) for i, t in enumerate(texts)]
        vectors = await ingestor._embed_passages(chunks)
        assert sorted(embedder.seen) == sorted({f"Guide\n{t}" for t in texts})
        assert vectors.shape == (5, 2)
        assert (vectors[0] == vectors[2]).all() and (vectors[0] == vectors[4]).all()
        assert vectors[1][0] == len("Guide\nRestart the pod.") and vectors[3][0] == len("Guide\nCheck the logs.")
    finally:
        ingestor.parsers.close()


def test_documents_are_written_in_slices_of_about_so_many_chunks():
    from types import SimpleNamespace

    from services.retrieval.ingest import _slices

    docs = [(SimpleNamespace(chunks=[0] * n), None, None) for n in (3, 3, 5, 1, 12, 2)]
    sizes = [[len(d[0].chunks) for d in part] for part in _slices(docs, 6)]  # type: ignore[arg-type]
    assert sizes == [[3, 3], [5, 1], [12], [2]]  # a longer document is a slice alone; order kept
    assert _slices([], 6) == []
