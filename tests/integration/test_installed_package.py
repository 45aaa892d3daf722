"""The package as a platform team runs it, the way the image does (deploy/docker/Dockerfile): the wheel installed
into a fresh virtual environment, then every service started from it as a user that is not root, with no HOME,
from an empty working directory it cannot write to, with the checkout nowhere on its path and one writable
temporary folder (the emptyDir at /tmp). Each must reach SERVING and together answer a real request through the
gateway, against the real Weaviate, Jaeger and Redis that `make test` runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ragline.dev.processes import grpc_serving, http_ok
from tests.integration.conftest import _require
from tests.wheel import ROOT, build_wheel

NOBODY = "65534"
# Ports of their own, beside the mesh that `make test` runs.
PORTS = {"router": 50171, "retrieval": 50172, "reranker": 50173, "grader": 50174, "generator": 50175,
         "orchestrator": 50176, "gateway": 50170}
HTTP_PORT = 8170
KEY = "installed-key"
TENANT = "tests_installed"


def _interpreter_nobody_can_run() -> str:
    """A Python 3.11 that a non-root user can execute, as the image's is (pyenv's lives under /root, mode 700)."""
    candidates = [shutil.which("python3.11"), "/usr/bin/python3.11", "/usr/local/bin/python3.11", sys._base_executable]
    for python in dict.fromkeys(c for c in candidates if c):
        probe = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", python, "-c",
                                "import sys, encodings; assert sys.version_info[:2] == (3, 11)"], capture_output=True)
        if probe.returncode == 0:
            return python
    pytest.fail(f"no Python 3.11 that user {NOBODY} can run among {candidates}")


@pytest.fixture(scope="module")
def installed() -> Iterator[dict[str, Path]]:
    """The wheel in a fresh venv (installed as root, as an image's build stage does), and the folders the services get."""
    _require(8080, "Weaviate")
    base = Path(tempfile.mkdtemp(prefix="ragline-installed-", dir="/tmp"))
    base.chmod(0o755)
    try:
        wheel = build_wheel(base)
        venv = base / "venv"
        subprocess.run([_interpreter_nobody_can_run(), "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "-r",
                        str(ROOT / "requirements.lock"), str(wheel)], check=True)
        workdir, tmp = base / "work", base / "tmp"
        workdir.mkdir(mode=0o555)
        tmp.mkdir()
        tmp.chmod(0o1777)
        yield {"venv": venv, "workdir": workdir, "tmp": tmp}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_installed_package_is_used_and_not_the_checkout(installed):
    found = subprocess.run([str(installed["venv"] / "bin" / "python"), "-c",
                            "import ragline, services.router.classifier as c; print(ragline.__file__); print(c.DEFAULT_MODEL)"],
                           cwd=installed["workdir"], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True)
    paths = found.stdout.split()
    assert all(p.startswith(str(installed["venv"])) for p in paths), paths
    assert Path(paths[1]).is_file()


def test_every_stage_starts_from_the_wheel_as_nobody_read_only_and_answers_through_the_gateway(installed):
    env = {
        "PATH": f"{installed['venv'] / 'bin'}:/usr/bin:/bin", "TMPDIR": str(installed["tmp"]), "PYTHONUNBUFFERED": "1",
        "RAGLINE_API_KEYS": f"{KEY}:{TENANT}", "RAGLINE_GATEWAY_HTTP_PORT": str(HTTP_PORT), "RAGLINE_METRICS_PORT": "0",
        **{f"RAGLINE_{name.upper()}_PORT": str(port) for name, port in PORTS.items()},
        **{f"RAGLINE_{name.upper()}_ADDRESSES": f"127.0.0.1:{port}" for name, port in PORTS.items() if name != "gateway"},
    }
    logs = installed["tmp"]
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name in PORTS:
            with open(logs / f"{name}.log", "wb") as log:
                procs[name] = subprocess.Popen(
                    ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
                     str(installed["venv"] / "bin" / "ragline"), "serve", name],
                    cwd=installed["workdir"], env=env, stdout=log, stderr=subprocess.STDOUT)
        ready = {name: grpc_serving(port) for name, port in PORTS.items()}
        ready["gateway-http"] = http_ok(f"http://127.0.0.1:{HTTP_PORT}/readyz")
        deadline = time.monotonic() + 180
        while ready and time.monotonic() < deadline:
            for name, proc in procs.items():
                if proc.poll() is not None:
                    pytest.fail(f"{name} exited with {proc.returncode}:\n{(logs / f'{name}.log').read_text()[-3000:]}")
            ready = {name: check for name, check in ready.items() if not check()}
            time.sleep(0.5)
        assert not ready, f"not serving after 180 s: {sorted(ready)}"

        headers = {"Authorization": f"Bearer {KEY}"}
        doc = {"id": "pools", "title": "HikariCP defaults",
               "text": "HikariCP is the default pool of Spring Boot. Its default maximumPoolSize is 10 connections."}
        resp = httpx.post(f"http://127.0.0.1:{HTTP_PORT}/v1/documents", json={"documents": [doc]}, headers=headers, timeout=120)
        assert resp.status_code == 200 and resp.json()["chunks_written"] == 1, resp.text
        resp = httpx.post(f"http://127.0.0.1:{HTTP_PORT}/v1/answer", headers=headers, timeout=60,
                          json={"query": "What is the default maximumPoolSize of HikariCP?", "strategy": "standard"})
        answer = resp.json()
        assert resp.status_code == 200 and "10 connections" in answer["text"], resp.text
        assert answer["citations"][0]["document_id"] == "pools" and not answer["degradations"]
        # What the services wrote went to the one writable folder, and as the user they ran as.
        written = [p for p in installed["tmp"].rglob("*") if p.is_file() and not p.name.endswith(".log")]
        assert any(p.name == "embeddings.sqlite" for p in written), written
        assert all(p.stat().st_uid == int(NOBODY) for p in written)
        assert not any(installed["workdir"].iterdir())
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", "true"], check=False)
        if os.environ.get("CI"):
            for log in sorted(logs.glob("*.log")):
                print(f"--- {log.name}\n{log.read_text()[-1500:]}")
