"""Start and stop the local stack (Weaviate, Jaeger, Redis and the ragline services) as processes.

Pid files and logs live under .run/. `down` stops only processes that `up` started, by pid.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

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


def http_ok(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    return check


def redis_ok(port: int) -> Callable[[], bool]:
    def check() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    return check


def grpc_serving(port: int) -> Callable[[], bool]:
    def check() -> bool:
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                resp = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
                return resp.status == health_pb2.HealthCheckResponse.SERVING
        except grpc.RpcError:
            return False

    return check


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
    services = [
        Component(name, [py, "-m", f"services.{name}"], [DEFAULT_PORTS[name]], grpc_serving(DEFAULT_PORTS[name]), env=service_env)
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


RESERVED_PORTS = Path("/proc/sys/net/ipv4/ip_local_reserved_ports")
# The block the mesh (50051, 50060-50066) and the extra processes of the tests and benchmarks (50090-50212) use.
PROJECT_PORTS = range(50050, 50300)


def reserve_ports(comps: list[Component]) -> None:
    """Keep the mesh's fixed ports out of the kernel's ephemeral range. Ports 50051 and 50060-50066 lie inside
    Linux's default range (32768-60999), so any outgoing connection (a stage's client to Weaviate, say) may hold
    one as its local port, and the stage that owns it then cannot bind. Needs root (as in CI); otherwise a rare
    collision stays possible, and the failing stage's log says so."""
    low, high = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    wanted = sorted({p for c in comps for p in c.ports if low <= p <= high} | {p for p in PROJECT_PORTS if low <= p <= high})
    try:
        current = RESERVED_PORTS.read_text().strip()
        have = {int(p) for part in current.split(",") if part for p in _expand(part)}
        if set(wanted) - have:
            block = f"{wanted[0]}-{wanted[-1]}" if wanted == list(range(wanted[0], wanted[-1] + 1)) else ",".join(map(str, wanted))
            RESERVED_PORTS.write_text(f"{current},{block}" if current else block)
    except OSError as exc:
        print(f"  note: could not reserve ports {wanted[0]}-{wanted[-1]} against ephemeral use ({exc.strerror}); "
              "run as root to avoid a rare bind failure")


def _expand(part: str) -> range:
    first, _, last = part.partition("-")
    return range(int(first), int(last or first) + 1)


def _pid_file(name: str) -> Path:
    return PIDS / f"{name}.pid"


def _running_pid(comp: Component) -> int | None:
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


def spawn_module(module: str, env: dict[str, str], ready: Callable[[], bool], log_name: str,
                 timeout_s: float = 60) -> subprocess.Popen[bytes]:
    """An extra ragline process outside the stack (for tests and benchmarks): `python -m module` with env
    added, logged to .run/logs/<log_name>.log, returned once ready() holds."""
    LOGS.mkdir(parents=True, exist_ok=True)
    with open(LOGS / f"{log_name}.log", "ab") as log:
        # An extra copy of a stage serves no metrics unless asked: its stage's port belongs to the mesh's.
        proc = subprocess.Popen([sys.executable, "-m", module], cwd=ROOT, env={**os.environ, "RAGLINE_METRICS_PORT": "0", **env},
                                stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{module} exited with code {proc.returncode}; read .run/logs/{log_name}.log")
        if ready():
            return proc
        time.sleep(0.2)
    proc.kill()
    raise TimeoutError(f"{module} not ready after {timeout_s:.0f}s; read .run/logs/{log_name}.log")


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 15) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start(comp: Component) -> None:
    if _running_pid(comp):
        print(f"  {comp.name}: already running (pid {_running_pid(comp)})")
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
    pid = _running_pid(comp)
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
    if Path(f"/proc/{pid}").exists() and _running_pid(comp):
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
        reserve_ports(components())
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
            pid = _running_pid(comp)
            state = "ready" if pid and comp.ready() else ("running, not ready" if pid else "stopped")
            print(f"  {comp.name:<13} {state:<20} {'pid ' + str(pid) if pid else ''}")


if __name__ == "__main__":
    sys.exit(main())
