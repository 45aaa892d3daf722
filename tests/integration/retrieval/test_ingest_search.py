"""Ingestion and native hybrid search through the running retrieval service and the real Weaviate."""

import grpc
import pytest
import weaviate
from weaviate.classes.query import Filter

from ragline.v1 import common_pb2, retrieval_pb2, retrieval_pb2_grpc

LONG_EN = "\n\n".join(
    f"## Part {i}\nSection {i} explains how HikariCP borrows connection number {i} from the pool and returns it quickly."
    for i in range(8)
)


def doc(doc_id: str, text: str, title: str = "", **metadata: str) -> retrieval_pb2.Document:
    return retrieval_pb2.Document(id=doc_id, title=title or doc_id, text=text, source=f"{doc_id}.md", metadata=metadata)


@pytest.fixture
def stub(retrieval_channel):
    return retrieval_pb2_grpc.RetrievalServiceStub(retrieval_channel)


def search(stub, tenant, query, **kw):
    return stub.Search(retrieval_pb2.SearchRequest(tenant=tenant, query=query, **kw), timeout=30).results


def count_chunks(tenant: str, document_id: str) -> int:
    with weaviate.connect_to_local(host="127.0.0.1", port=8080, grpc_port=50051) as client:
        coll = client.collections.use("RaglineChunk").with_tenant(tenant)
        res = coll.aggregate.over_all(filters=Filter.by_property("document_id").equal(document_id), total_count=True)
        return int(res.total_count or 0)


def test_reingest_replaces_chunks_and_leaves_no_orphans(stub, tenant):
    first = stub.Ingest(retrieval_pb2.IngestRequest(tenant=tenant, documents=[doc("guide", "# Guide\n" + LONG_EN)]), timeout=120)
    n_first = first.results[0].chunks
    assert n_first > 1 and count_chunks(tenant, "guide") == n_first
    # Same document again: the same objects, not duplicates.
    again = stub.Ingest(retrieval_pb2.IngestRequest(tenant=tenant, documents=[doc("guide", "# Guide\n" + LONG_EN)]), timeout=120)
    assert again.results[0].chunks == n_first and count_chunks(tenant, "guide") == n_first
    # A shorter version: the extra chunks of the old version are gone.
    stub.Ingest(retrieval_pb2.IngestRequest(tenant=tenant, documents=[doc("guide", "A single short paragraph about pools.")]), timeout=120)
    assert count_chunks(tenant, "guide") == 1
    hits = search(stub, tenant, "borrows connection number 5", alpha=0.0)
    assert all(h.chunk.document_id == "guide" for h in hits)
    assert all("number 5" not in h.chunk.text for h in hits)


def test_tenants_never_see_each_other(stub, tenant):
    other = tenant + "_b"
    stub.Ingest(retrieval_pb2.IngestRequest(tenant=tenant, documents=[doc("a", "Tenant A keeps its secrets about zebras.")]), timeout=60)
    stub.Ingest(retrieval_pb2.IngestRequest(tenant=other, documents=[doc("b", "Tenant B keeps its secrets about zebras.")]), timeout=60)
    for alpha in (0.0, 0.5, 1.0):
        assert {h.chunk.document_id for h in search(stub, tenant, "secrets about zebras", alpha=alpha)} == {"a"}
        assert {h.chunk.document_id for h in search(stub, other, "secrets about zebras", alpha=alpha)} == {"b"}


def test_chinese_bm25_hit_and_english_terms_do_not_match_chinese_by_letters(stub, tenant):
    stub.Ingest(retrieval_pb2.IngestRequest(tenant=tenant, documents=[
        doc("k8s", "容器反复退出时，kubelet 会按指数退避重启，Pod 状态显示为 CrashLoopBackOff。"),
        doc("pool", "Pool exhaustion happens when every connection is borrowed."),
    ]), timeout=60)
    hits = search(stub, tenant, "指数退避", alpha=0.0)
    assert hits and hits[0].chunk.document_id == "k8s" and hits[0].scores.bm25 > 0
    # gse_ch splits Latin words into letters; the Chinese copy holds no Latin text, so this must not match k8s.
    hits = search(stub, tenant, "exhaustion borrowed", alpha=0.0)
    assert [h.chunk.document_id for h in hits] == ["pool"]


def test_pure_bm25_pure_vector_and_hybrid_are_selectable_with_scores(stub, tenant):
    stub.Ingest(retrieval_pb2.IngestRequest(tenant=tenant, documents=[
        doc("redis", "Redis outages cause connection timeouts in every client."),
        doc("k8s", "Kubernetes restarts crashed containers with exponential back-off."),
    ]), timeout=60)
    bm25 = search(stub, tenant, "Redis outages", alpha=0.0)
    vector = search(stub, tenant, "Redis outages", alpha=1.0)
    hybrid = search(stub, tenant, "Redis outages", alpha=0.5, fusion=retrieval_pb2.FUSION_TYPE_RANKED)
    assert bm25[0].chunk.document_id == vector[0].chunk.document_id == hybrid[0].chunk.document_id == "redis"
    assert bm25[0].scores.bm25 > 0 and bm25[0].scores.vector == 0
    assert vector[0].scores.vector > 0 and vector[0].scores.bm25 == 0
    assert "Hybrid" in hybrid[0].scores.explain
    limited = search(stub, tenant, "Redis outages", alpha=1.0, max_vector_distance=0.01)
    assert len(limited) < len(vector)
    # Each hybrid candidate carries its cosine similarity, the same the pure vector search reports for it.
    by_id = {r.chunk.id: r.scores.vector for r in vector}
    assert all(r.scores.vector == pytest.approx(by_id[r.chunk.id], abs=1e-4) for r in hybrid)


def test_metadata_filters_equality_and_set_membership(stub, tenant):
    stub.Ingest(retrieval_pb2.IngestRequest(tenant=tenant, documents=[
        doc("d1", "Connection pools in the payments team.", team="payments"),
        doc("d2", "Connection pools in the search team.", team="search"),
        doc("d3", "Connection pools in the ops team.", team="ops"),
    ]), timeout=60)
    only = search(stub, tenant, "connection pools", filters=[common_pb2.MetadataFilter(field="team", values=["search"])])
    assert {h.chunk.document_id for h in only} == {"d2"}
    some = search(stub, tenant, "connection pools", filters=[common_pb2.MetadataFilter(field="team", values=["ops", "payments"])])
    assert {h.chunk.document_id for h in some} == {"d1", "d3"}
    langs = search(stub, tenant, "connection pools", filters=[common_pb2.MetadataFilter(field="lang", values=["zh"])])
    assert langs == [] or all(h.chunk.metadata["lang"] == "zh" for h in langs)
    assert only[0].chunk.metadata["team"] == "search" and only[0].chunk.metadata["lang"] == "en"


def test_bad_records_are_reported_and_skipped(stub, tenant):
    resp = stub.Ingest(retrieval_pb2.IngestRequest(tenant=tenant, documents=[
        doc("", "text without an id"),
        doc("empty", "   "),
        doc("good", "A good document about pools."),
    ]), timeout=60)
    errors = {r.document_id: r.error for r in resp.results}
    assert errors[""] == "document id is empty" and errors["empty"] == "empty document: no text and no file content"
    assert errors["good"] == "" and resp.documents_failed == 2 and resp.chunks_written == 1


@pytest.mark.parametrize(
    ("request_kw", "message"),
    [
        ({"tenant": "bad tenant!", "query": "x"}, "bad tenant name"),
        ({"tenant": "ok", "query": "   "}, "query is empty"),
        ({"tenant": "ok", "query": "x", "alpha": 1.5}, "alpha must be within"),
        ({"tenant": "ok", "query": "x", "limit": 100000}, "limit must be within"),
        ({"tenant": "ok", "query": "x", "query_properties": [retrieval_pb2.QueryProperty(name="secret")]}, "unknown query property"),
    ],
)
def test_bad_search_input_is_invalid_argument(stub, request_kw, message):
    with pytest.raises(grpc.RpcError) as err:
        stub.Search(retrieval_pb2.SearchRequest(**request_kw), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in err.value.details()


def test_empty_ingest_is_a_clear_error(stub, tenant):
    with pytest.raises(grpc.RpcError) as err:
        stub.Ingest(retrieval_pb2.IngestRequest(tenant=tenant), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "no documents" in err.value.details()
