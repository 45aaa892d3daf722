"""Access groups: a key reads only documents without groups or sharing one of its own, on every path — search with
any alpha and filters, every strategy's hops and rewrites, streaming, the answer cache, listing, getting and
deleting. Over a thousand random queries, with keys of different groups, on documents that share their words."""

from __future__ import annotations

import json
import random

import grpc
import httpx
import pytest

from ragline.v1 import retrieval_pb2, retrieval_pb2_grpc
from tests.integration.conftest import GATEWAY_HTTP, RETRIEVAL

TENANT = "tests_groups"
# Keys of scripts/test.sh: tenant tests_groups with these groups.
KEYS = {"hr": "tests_groups:hr", "eng": "tests_groups:eng", "both": "tests_groups:hr|eng", "plain": TENANT}
GROUPS_OF_KEY = {"hr": {"hr"}, "eng": {"eng"}, "both": {"hr", "eng"}, "plain": set()}
WORDS = ("salary review deploy pipeline backup restore incident budget hiring laptop vpn outage rollback quota "
         "database cache 工资 部署 备份 故障 预算 招聘 回滚 数据库").split()
DOC_GROUPS = [[], ["hr"], ["eng"], ["hr", "eng"]]


def _documents(rng: random.Random) -> list[dict]:
    docs = []
    for i in range(32):
        groups = DOC_GROUPS[i % 4]
        words = " ".join(rng.choice(WORDS) for _ in range(40))
        docs.append({"id": f"doc-{i:02d}-{'-'.join(groups) or 'all'}", "title": f"Note {i} about {rng.choice(WORDS)}",
                     "text": f"The {rng.choice(WORDS)} note {i}. {words}.", "metadata": {"access_groups": groups, "team": f"t{i % 3}"}})
    return docs


def readable(doc_id: str, groups: set[str]) -> bool:
    doc_groups = set(doc_id.split("-", 2)[2].split("-")) - {"all"}
    return not doc_groups or bool(doc_groups & groups)


@pytest.fixture(scope="module")
def keys(api_keys: dict[str, str]) -> dict[str, str]:
    with grpc.insecure_channel(RETRIEVAL) as channel:
        retrieval_pb2_grpc.RetrievalServiceStub(channel).DeleteTenant(retrieval_pb2.DeleteTenantRequest(tenant=TENANT), timeout=60)
    keys = {name: api_keys[entry] for name, entry in KEYS.items()}
    resp = httpx.post(f"{GATEWAY_HTTP}/v1/documents", json={"documents": _documents(random.Random(7))}, timeout=300,
                      headers={"Authorization": f"Bearer {keys['both']}"})
    assert resp.status_code == 200 and resp.json()["documents_failed"] == 0, resp.text
    return keys


def _headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_a_thousand_random_searches_never_return_a_chunk_of_a_group_the_caller_lacks(keys):
    rng = random.Random(20261201)
    returned = 0
    with grpc.insecure_channel(RETRIEVAL) as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        for _ in range(1000):
            groups = rng.choice([[], ["hr"], ["eng"], ["hr", "eng"], ["finance"], ["finance", "eng"]])
            request = retrieval_pb2.SearchRequest(tenant=TENANT, query=" ".join(rng.sample(WORDS, rng.randint(1, 4))),
                                                  alpha=rng.choice([0.0, 0.5, 1.0]), limit=rng.choice([5, 20, 50]),
                                                  access_groups=groups)
            if rng.random() < 0.3:
                request.filters.add(field="team", values=[f"t{rng.randint(0, 2)}"])
            results = stub.Search(request, timeout=30).results
            returned += len(results)
            leaked = [r.chunk.document_id for r in results if not readable(r.chunk.document_id, set(groups))]
            assert not leaked, (groups, request.query, leaked)
    assert returned > 5000  # the searches did find things: what they found was all readable


@pytest.mark.parametrize("name", list(KEYS))
def test_every_strategy_and_the_stream_cite_and_retrieve_only_readable_documents(keys, name):
    rng = random.Random(name)
    allowed = GROUPS_OF_KEY[name]
    with httpx.Client(base_url=GATEWAY_HTTP, timeout=60, headers=_headers(keys[name])) as client:
        for strategy in ("standard", "multihop", "selfrag", "combined", "auto"):
            for _ in range(4):
                words = rng.sample(WORDS, 3)
                query = f"What does the note say about {words[0]} and how does it relate to {words[1]} {words[2]}?"
                body = client.post("/v1/answer", json={"query": query, "strategy": strategy}).json()
                seen = set(body["retrieved_documents"]) | {c["document_id"] for c in body["citations"]}
                assert all(readable(d, allowed) for d in seen), (name, strategy, seen)
        with client.stream("POST", "/v1/answer:stream", json={"query": "backup restore 备份", "strategy": "auto"}) as stream:
            final = json.loads([line for line in stream.iter_lines() if line.startswith("data:")][-1][5:])
        assert all(readable(d, allowed) for d in final["retrieved_documents"]), final


def test_the_answer_cache_is_never_shared_between_keys_of_different_groups(keys):
    question = {"query": "What does note 1 say about salary review?", "strategy": "standard"}
    hr = httpx.post(f"{GATEWAY_HTTP}/v1/answer", json=question, headers=_headers(keys["hr"]), timeout=60).json()
    again = httpx.post(f"{GATEWAY_HTTP}/v1/answer", json=question, headers=_headers(keys["hr"]), timeout=60).json()
    assert again["cached"] is True
    for name in ("eng", "plain"):
        other = httpx.post(f"{GATEWAY_HTTP}/v1/answer", json=question, headers=_headers(keys[name]), timeout=60).json()
        assert other["cached"] is False and other["trace_id"] != hr["trace_id"]
        assert all(readable(d, GROUPS_OF_KEY[name]) for d in other["retrieved_documents"])


@pytest.mark.parametrize("name", list(KEYS))
def test_listing_and_getting_show_only_readable_documents(keys, name):
    listed = httpx.get(f"{GATEWAY_HTTP}/v1/documents", params={"page_size": 1000}, headers=_headers(keys[name]), timeout=60).json()
    ids = {d["id"] for d in listed["documents"]}
    expected = {d["id"] for d in _documents(random.Random(7)) if readable(d["id"], GROUPS_OF_KEY[name])}
    assert ids == expected
    for doc_id in ("doc-01-hr", "doc-02-eng", "doc-03-hr-eng", "doc-00-all"):
        resp = httpx.get(f"{GATEWAY_HTTP}/v1/documents/{doc_id}", headers=_headers(keys[name]), timeout=60)
        assert resp.status_code == (200 if readable(doc_id, GROUPS_OF_KEY[name]) else 404), (name, doc_id)


def test_a_key_cannot_delete_what_it_cannot_read_nor_give_groups_it_lacks(keys):
    resp = httpx.delete(f"{GATEWAY_HTTP}/v1/documents/doc-01-hr", headers=_headers(keys["eng"]), timeout=60)
    assert resp.status_code == 404
    assert httpx.get(f"{GATEWAY_HTTP}/v1/documents/doc-01-hr", headers=_headers(keys["hr"]), timeout=60).status_code == 200
    denied = httpx.post(f"{GATEWAY_HTTP}/v1/documents", headers=_headers(keys["eng"]), timeout=60,
                        json={"documents": [{"id": "x", "text": "y", "metadata": {"access_groups": ["hr"]}}]})
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "PERMISSION_DENIED"
