"""The Kubernetes manifests as a cluster would get them: every overlay rendered by kustomize's Go API and decoded
strictly into the official API types (deploy/kubernetes/manifests_test.go, a Go module like deploy/jaeger), then
checked against the code: every variable they set is one a process reads, and valid for it; every port, probe,
Service and address is the code's own."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from ragline.runtime.config import DEFAULT_PORTS, GATEWAY_HTTP_PORT
from ragline.runtime.metrics import METRICS_PORTS
from tests.deploy_settings import known_names, validate

KUBERNETES = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    out = tmp_path_factory.mktemp("rendered")
    result = subprocess.run(["go", "test", "-count=1", "./..."], cwd=KUBERNETES, capture_output=True, text=True,
                            env={**os.environ, "RAGLINE_RENDER_DIR": str(out), "GOTOOLCHAIN": "local"})
    assert result.returncode == 0, result.stdout + result.stderr
    return {p.stem: [d for d in yaml.safe_load_all(p.read_text()) if d] for p in sorted(out.glob("*.yaml"))}


def test_both_overlays_render(rendered):
    assert set(rendered) == {"dev", "production"}


@pytest.mark.parametrize("overlay", ["dev", "production"])
def test_every_variable_is_read_by_the_code_and_valid_for_its_stage(rendered, overlay):
    objects = rendered[overlay]
    (config,) = [o["data"] for o in objects if o["kind"] == "ConfigMap"]
    known = known_names()
    assert set(config) <= known, f"the ConfigMap sets variables no process reads: {sorted(set(config) - known)}"
    stages = set()
    for d in (o for o in objects if o["kind"] == "Deployment"):
        (container,) = d["spec"]["template"]["spec"]["containers"]
        env = dict(config)
        for var in container.get("env", []):
            # A Secret's value is the operator's; a well-formed stand-in checks the rest.
            env[var["name"]] = var["value"] if "value" in var else "a-key:a_tenant"
        unknown = set(env) - known
        assert not unknown, f"{d['metadata']['name']} sets variables no process reads: {sorted(unknown)}"
        stages.add(validate(env))
    assert stages == set(DEFAULT_PORTS)


@pytest.mark.parametrize("overlay", ["dev", "production"])
def test_every_port_probe_service_and_address_is_the_codes(rendered, overlay):
    objects = rendered[overlay]
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    for d in (o for o in objects if o["kind"] == "Deployment"):
        (container,) = d["spec"]["template"]["spec"]["containers"]
        stage = next(v["value"] for v in container["env"] if v["name"] == "RAGLINE_SERVICE")
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["grpc"] == DEFAULT_PORTS[stage]
        metrics_port = GATEWAY_HTTP_PORT if stage == "gateway" else METRICS_PORTS[stage]
        assert ports.get("metrics", ports.get("http")) == metrics_port
        assert d["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == str(metrics_port)
        assert container["livenessProbe"]["grpc"]["port"] == DEFAULT_PORTS[stage]
        if stage == "gateway":
            assert ports["http"] == GATEWAY_HTTP_PORT and container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        service_ports = {p["name"]: p["port"] for p in services[stage]["spec"]["ports"]}
        assert service_ports["grpc"] == DEFAULT_PORTS[stage]
    (config,) = [o["data"] for o in objects if o["kind"] == "ConfigMap"]
    for stage in METRICS_PORTS:
        assert config[f"RAGLINE_{stage.upper()}_ADDRESSES"] == f"dns:///{stage}:{DEFAULT_PORTS[stage]}"


def test_production_sets_the_image_once_and_dev_runs_the_local_build(rendered):
    images = {overlay: {c["image"] for o in objs if o["kind"] == "Deployment" for c in o["spec"]["template"]["spec"]["containers"]}
              for overlay, objs in rendered.items()}
    assert images == {"dev": {"ragline:dev"}, "production": {"registry.example.com/ragline:0.1.0"}}
