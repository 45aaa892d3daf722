"""deploy/compose/docker-compose.yml against the code: a service per stage that says which stage it is, only
variables some process reads and with values its settings accept, the code's ports, health checks, and each stage
started only once what it calls is healthy."""

from __future__ import annotations

from pathlib import Path

import yaml

from ragline.runtime.config import DEFAULT_PORTS, GATEWAY_HTTP_PORT
from tests.deploy_settings import known_names, validate

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "compose" / "docker-compose.yml"
# Who calls whom (the proto clients each process holds): what each must wait for.
CALLS = {"orchestrator": {"router", "retrieval", "reranker", "grader", "generator"},
         "gateway": {"orchestrator", "retrieval", "redis"}, "retrieval": {"weaviate"}}


def services() -> dict[str, dict]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]


def test_every_stage_is_a_service_that_says_which_stage_it_is_with_valid_settings():
    stages = {name: svc for name, svc in services().items() if name in DEFAULT_PORTS}
    assert set(stages) == set(DEFAULT_PORTS)
    known = known_names()
    for name, svc in stages.items():
        env = {k: str(v) for k, v in svc["environment"].items()}
        # ${RAGLINE_API_KEYS:?...} is the operator's; a well-formed stand-in checks the rest.
        env = {k: ("a-key:a_tenant" if v.startswith("${") else v) for k, v in env.items()}
        assert set(env) <= known, f"{name} sets variables no process reads: {sorted(set(env) - known)}"
        assert validate(env) == name


def test_addresses_and_published_ports_are_the_codes():
    svcs = services()
    env = svcs["router"]["environment"]
    for stage in DEFAULT_PORTS.keys() - {"gateway"}:
        assert env[f"RAGLINE_{stage.upper()}_ADDRESSES"] == f"{stage}:{DEFAULT_PORTS[stage]}"
    assert set(svcs["gateway"]["ports"]) == {f"{GATEWAY_HTTP_PORT}:{GATEWAY_HTTP_PORT}",
                                             f"{DEFAULT_PORTS['gateway']}:{DEFAULT_PORTS['gateway']}"}


def test_every_service_has_a_health_check_and_waits_for_what_it_calls_to_be_healthy():
    svcs = services()
    for name, svc in svcs.items():
        assert svc.get("healthcheck", {}).get("test"), f"{name} has no health check"
        if name in DEFAULT_PORTS:
            assert svc["healthcheck"]["test"] == ["CMD", "ragline", "health"]
    for name, callees in CALLS.items():
        waits = svcs[name].get("depends_on", {})
        assert set(waits) == callees, f"{name} waits for {sorted(waits)}, calls {sorted(callees)}"
        assert all(w["condition"] == "service_healthy" for w in waits.values())
