"""Isolation between tenants, tried as an attacker would: two tenants with documents on the same words, a thousand
random questions from each key — some naming the other tenant's marker word, some asked by both — and no chunk,
citation, cached answer or error of the other tenant ever comes back. Then the audit: no API key and no document
text in any process's log or in the spans Jaeger holds for those requests."""

from __future__ import annotations

import os
import random
from pathlib import Path

import grpc
import httpx
import pytest

from ragline.v1 import retrieval_pb2, retrieval_pb2_grpc
from tests.integration.conftest import GATEWAY_HTTP, JAEGER, RETRIEVAL

TENANTS = ("tests_iso_1", "tests_iso_2")
MARKER = {"tests_iso_1": "zorblax", "tests_iso_2": "quintrel"}  # a word only that tenant's documents use
WORDS = "invoice refund deploy rollback backup restore quota vpn outage cache 发票 退款 部署 回滚 备份 故障".split()
LOGS = Path(__file__).resolve().parents[3] / ".run" / "logs"


def _secret(tenant: str, i: int) -> str:
    """Document text no question ever contains: if it shows up in a log or a span, document text leaked there."""
    return f"docsecret{tenant[-1]}x{i:02d}"


def _documents(tenant: str, rng: random.Random) -> list[dict]:
    return [{"id": f"{tenant}-doc-{i:02d}", "title": f"{MARKER[tenant]} note {i}",
             "text": f"The {MARKER[tenant]} {rng.choice(WORDS)} procedure {_secret(tenant, i)}. "
                     + " ".join(rng.choice(WORDS) for _ in range(30)) + "."} for i in range(12)]


@pytest.fixture(scope="module")
def keys(api_keys: dict[str, str]) -> dict[str, str]:
    keys = {t: api_keys[t] for t in TENANTS}
    with grpc.insecure_channel(RETRIEVAL) as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        for tenant in TENANTS:
            stub.DeleteTenant(retrieval_pb2.DeleteTenantRequest(tenant=tenant), timeout=60)
    for tenant in TENANTS:
        resp = httpx.post(f"{GATEWAY_HTTP}/v1/documents", json={"documents": _documents(tenant, random.Random(tenant))},
                          headers={"Authorization": f"Bearer {keys[tenant]}"}, timeout=300)
        assert resp.status_code == 200 and resp.json()["documents_failed"] == 0, resp.text
    return keys


def _other(tenant: str) -> str:
    return TENANTS[1 - TENANTS.index(tenant)]


def test_a_thousand_random_questions_never_reach_the_other_tenant(keys):
    rng = random.Random(20261201)
    traces: list[str] = []
    shared: list[str] = []
    retrieved = cached = refused = 0
    clients = {t: httpx.Client(base_url=GATEWAY_HTTP, timeout=60, headers={"Authorization": f"Bearer {keys[t]}"})
               for t in TENANTS}
    try:
        for n in range(1000):
            tenant = rng.choice(TENANTS)
            words = rng.sample(WORDS, 2)
            if n % 5 == 0:  # asking by the other tenant's own word
                words.append(MARKER[_other(tenant)])
            if n % 7 == 0 and shared:  # a question the other tenant asked already (its answer may be cached)
                query = rng.choice(shared)
            else:
                query = f"What is the {' '.join(words)} procedure?"
                shared.append(query)
            strategy = rng.choice(("standard", "standard", "selfrag", "auto"))
            resp = clients[tenant].post("/v1/answer", json={"query": query, "strategy": strategy})
            body = resp.json()
            if resp.status_code != 200:  # a documented error, and nothing of the other tenant in it
                refused += 1
                assert MARKER[_other(tenant)] not in str(body.get("error", {}).get("message", "")).replace(query, "")
                continue
            # What the answer says and quotes (the question itself aside, which may name the other's word).
            said = " ".join([body["text"], *(str(c) for c in body["citations"]), *body.get("degradations", [])])
            assert MARKER[_other(tenant)] not in said.replace(query, ""), (tenant, query, said[:500])
            seen = set(body["retrieved_documents"]) | {c["document_id"] for c in body["citations"]}
            assert all(d.startswith(f"{tenant}-") for d in seen), (tenant, query, seen)
            retrieved += bool(seen)
            cached += bool(body.get("cached"))
            if len(traces) < 25 and not body.get("cached"):
                traces.append(body["trace_id"])
    finally:
        for client in clients.values():
            client.close()
    # The check has teeth: most answers did retrieve (their own tenant's) documents, and some came from the cache.
    print(f"{retrieved} of 1000 answers retrieved documents, {cached} from the answer cache, {refused} refused")
    assert retrieved > 500 and cached > 0 and refused < 10
    assert len(traces) == 25
    _audit_spans(traces, keys)


def _audit_spans(trace_ids: list[str], keys: dict[str, str]) -> None:
    """Every attribute of every span of those requests: no API key, no document text."""
    import time

    time.sleep(2)  # the processes export their spans in batches
    checked = 0
    for trace_id in trace_ids:
        resp = httpx.get(f"{JAEGER}/api/traces/{trace_id}", timeout=10)
        if resp.status_code != 200 or not resp.json().get("data"):
            continue
        for span in resp.json()["data"][0]["spans"]:
            values = " ".join(str(tag.get("value", "")) for tag in span.get("tags", []))
            values += " ".join(str(f.get("value", "")) for log in span.get("logs", []) for f in log.get("fields", []))
            assert not any(k in values for k in keys.values()), (span["operationName"], "an API key in a span")
            assert "docsecret" not in values, (span["operationName"], values[:300])
            checked += 1
    assert checked > 100, checked


def test_no_log_holds_an_api_key_or_document_text(keys):
    """After the thousand questions (and every other test before this one): every process's log."""
    configured = [entry.split(":", 1)[0] for entry in os.environ.get("RAGLINE_API_KEYS", "").split(",") if ":" in entry]
    assert configured and LOGS.is_dir()
    for path in sorted(LOGS.glob("*.log")):
        text = path.read_text(encoding="utf-8", errors="replace")
        leaked = [k for k in configured if k in text]
        assert not leaked, f"{path.name} holds API keys {leaked}"
        assert "docsecret" not in text, f"{path.name} holds document text"


def test_requests_without_a_valid_key_are_counted_and_limited_by_address_while_valid_keys_still_pass(api_keys):
    """A gateway of its own with a small bad-key bucket (3, refilled at 0.2/s), so that the shared one's is untouched."""
    from ragline.v1 import common_pb2, ragline_pb2, ragline_pb2_grpc
    from tests.integration.conftest import spawn

    env = {"RAGLINE_GATEWAY_PORT": "50225", "RAGLINE_GATEWAY_HTTP_PORT": "8225", "RAGLINE_GATEWAY_CACHE_ENABLED": "false",
           "RAGLINE_GATEWAY_BAD_KEY_RATE_PER_S": "0.2", "RAGLINE_GATEWAY_BAD_KEY_BURST": "3"}
    question = {"query": "What is the zorblax procedure?", "strategy": "standard"}
    with spawn("gateway", 50225, env):
        url = "http://127.0.0.1:8225"
        guesses = [httpx.post(f"{url}/v1/answer", json=question, timeout=30,
                              headers={"Authorization": f"Bearer guess-{i}"} if i % 2 else {}) for i in range(5)]
        assert [r.status_code for r in guesses] == [401, 401, 401, 429, 429], [r.text for r in guesses]
        assert "without a valid API key from this address" in guesses[-1].json()["error"]["message"]
        # Over gRPC from the same address: the same bucket.
        with grpc.insecure_channel("127.0.0.1:50225") as channel, pytest.raises(grpc.RpcError) as refused:
            ragline_pb2_grpc.RaglineServiceStub(channel).Answer(
                ragline_pb2.AnswerRequest(query=question["query"], strategy=common_pb2.STRATEGY_STANDARD),
                metadata=(("authorization", "Bearer guess-grpc"),), timeout=30)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        valid = httpx.post(f"{url}/v1/answer", json={**question, "strategy": "standard"}, timeout=30,
                           headers={"Authorization": f"Bearer {api_keys['tests_iso_1']}"})
        assert valid.status_code == 200, valid.text
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
        assert 'ragline_gateway_rejected_keys_total{outcome="unauthenticated"} 3.0' in metrics
        assert 'ragline_gateway_rejected_keys_total{outcome="rate_limited"} 3.0' in metrics
