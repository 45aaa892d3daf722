"""Deadlines and circuit breakers, with extra service processes started for the test so the shared mesh
is left alone: a reranker that is killed, a reranker that is too slow, and a rate-limited gateway."""

from __future__ import annotations

import time

import httpx

from tests.integration.conftest import jaeger_trace, spawn

QUESTION = {"query": "What is the default maximumPoolSize of HikariCP?", "strategy": "standard"}


def private_mesh(ports: dict[str, int], reranker_env: dict[str, str], orchestrator_env: dict[str, str] | None = None):
    """A reranker, an orchestrator using it (and the shared other stages) and a gateway using that orchestrator."""
    from contextlib import ExitStack

    stack = ExitStack()
    reranker = stack.enter_context(spawn("services.reranker", ports["reranker"], {"RAGLINE_RERANKER_PORT": str(ports["reranker"]), **reranker_env}))
    stack.enter_context(spawn("services.orchestrator", ports["orchestrator"], {
        "RAGLINE_ORCHESTRATOR_PORT": str(ports["orchestrator"]),
        "RAGLINE_RERANKER_ADDRESSES": f"127.0.0.1:{ports['reranker']}",
        **(orchestrator_env or {}),
    }))
    stack.enter_context(spawn("gateway", ports["gateway"], {
        "RAGLINE_GATEWAY_PORT": str(ports["gateway"]),
        "RAGLINE_GATEWAY_HTTP_PORT": str(ports["http"]),
        "RAGLINE_ORCHESTRATOR_ADDRESSES": f"127.0.0.1:{ports['orchestrator']}",
        "RAGLINE_GATEWAY_CACHE_ENABLED": "false",
    }))
    return stack, reranker


def test_killed_reranker_degrades_to_fused_order_then_opens_the_breaker(api_keys, tenant_c_corpus):
    ports = {"reranker": 50083, "orchestrator": 50086, "gateway": 50080, "http": 8010}
    stack, reranker = private_mesh(ports, {}, {"RAGLINE_BREAKER_FAIL_MAX": "2", "RAGLINE_BREAKER_RESET_TIMEOUT_S": "300"})
    with stack:
        headers = {"Authorization": f"Bearer {api_keys['tests_c']}"}
        url = f"http://127.0.0.1:{ports['http']}/v1/answer"
        healthy = httpx.post(url, json=QUESTION, headers=headers, timeout=30).json()
        assert healthy["degradations"] == [] and "10 connections" in healthy["text"]

        reranker.kill()
        reranker.wait(10)

        answers = [httpx.post(url, json=QUESTION, headers=headers, timeout=30) for _ in range(3)]
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
        bodies = [a.json() for a in answers]
        for body in bodies:
            assert "10 connections" in body["text"]
            assert any(d.startswith("reranker") and "kept the fused hybrid order" in d for d in body["degradations"])
        assert "circuit open" in bodies[-1]["degradations"][0]

        trace = jaeger_trace(bodies[-1]["trace_id"], {"ragline-gateway", "ragline-orchestrator", "ragline-retrieval"},
                             expect_operations=frozenset({"orchestrator.flow"}))
        flow = next(s for s in trace["spans"] if s["operationName"] == "orchestrator.flow")
        tags = {t["key"]: t["value"] for t in flow["tags"]}
        assert "circuit open" in str(tags["ragline.degradations"])
        events = [f["value"] for s in trace["spans"] for log in s.get("logs", []) for f in log["fields"] if f["key"] == "what"]
        assert any("reranker" in e for e in events)


SLOW_STAGE_MS = 10_000


def test_deadlines_504_quickly_and_slow_stage_is_cut_off(api_keys, tenant_c_corpus):
    ports = {"reranker": 50093, "orchestrator": 50096, "gateway": 50090, "http": 8020}
    stack, _ = private_mesh(ports, {"RAGLINE_FAULT_DELAY_MS": str(SLOW_STAGE_MS)})
    with stack:
        headers = {"Authorization": f"Bearer {api_keys['tests_c']}"}
        url = f"http://127.0.0.1:{ports['http']}/v1/answer"
        started = time.monotonic()
        resp = httpx.post(url, json=QUESTION, headers={**headers, "X-Request-Timeout-Ms": "50"}, timeout=30)
        elapsed_ms = (time.monotonic() - started) * 1000
        # 50 ms is too little for anything but retrieval: 504 when even retrieval does not fit (the query's vector is
        # not yet cached), else an answer that says which stages the deadline skipped. Never the slow reranker's.
        if resp.status_code == 504:
            assert resp.json()["error"]["code"] == "DEADLINE_EXCEEDED"
        else:
            assert resp.status_code == 200, resp.text
            assert any("deadline budget exhausted" in d for d in resp.json()["degradations"]), resp.text
        # Not a speed target: the bound is half the slow stage's delay, so it only shows nobody waited for it.
        assert elapsed_ms < SLOW_STAGE_MS / 2

        # With time for retrieval but not for the 10 s reranker, the answer comes back degraded within the deadline.
        started = time.monotonic()
        resp = httpx.post(url, json=QUESTION, headers={**headers, "X-Request-Timeout-Ms": "3000"}, timeout=30)
        elapsed_ms = (time.monotonic() - started) * 1000
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert elapsed_ms < SLOW_STAGE_MS / 2
        assert any(d.startswith("reranker failed: DEADLINE_EXCEEDED") for d in body["degradations"])
        assert body["text"]


def test_rate_limit_is_429(api_keys):
    with spawn("gateway", 50100, {"RAGLINE_GATEWAY_PORT": "50100", "RAGLINE_GATEWAY_HTTP_PORT": "8030",
                                  "RAGLINE_GATEWAY_RATE_LIMIT_BURST": "2", "RAGLINE_GATEWAY_RATE_LIMIT_PER_S": "0.01"}):
        headers = {"Authorization": f"Bearer {api_keys['tests_b']}"}
        statuses = [httpx.post("http://127.0.0.1:8030/v1/answer", json={"query": "  "}, headers=headers, timeout=10).status_code
                    for _ in range(3)]
        assert statuses == [400, 400, 429]
        resp = httpx.post("http://127.0.0.1:8030/v1/answer", json={"query": "x"}, headers=headers, timeout=10)
        assert resp.json()["error"]["code"] == "RESOURCE_EXHAUSTED"
