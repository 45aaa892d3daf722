"""Processes of a local stack, apart from the stack itself: readiness checks, an extra ragline process for a test or
a benchmark, and keeping the project's ports out of the kernel's ephemeral range."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / ".run" / "logs"


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

@contextmanager
def thinking_mesh(ports: dict[str, int], model_env: dict[str, str], orchestrator_env: dict[str, str] | None = None,
                  log_prefix: str = "extra") -> Iterator[None]:
    """Extra router, grader and generator processes with model_env (their model), and an orchestrator that uses them
    (and the mesh's other stages), on `ports` (router, grader, generator, orchestrator); all stopped afterwards."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name in ("router", "grader", "generator"):
            procs.append(spawn_module(f"services.{name}", {**model_env, f"RAGLINE_{name.upper()}_PORT": str(ports[name])},
                                      grpc_serving(ports[name]), f"{log_prefix}-{name}-{ports[name]}"))
        procs.append(spawn_module("services.orchestrator", {
            "RAGLINE_ORCHESTRATOR_PORT": str(ports["orchestrator"]),
            **{f"RAGLINE_{n.upper()}_ADDRESSES": f"127.0.0.1:{ports[n]}" for n in ("router", "grader", "generator")},
            **(orchestrator_env or {})}, grpc_serving(ports["orchestrator"]), f"{log_prefix}-orchestrator-{ports['orchestrator']}"))
        yield
    finally:
        for proc in reversed(procs):
            stop_process(proc)


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


RESERVED_PORTS = Path("/proc/sys/net/ipv4/ip_local_reserved_ports")
# The block the mesh (50051, 50060-50066) and the extra processes of the tests and benchmarks (50090-50273) use.
PROJECT_PORTS = range(50050, 50300)


def reserve_ports(ports: Iterable[int]) -> None:
    """Keep the mesh's fixed ports out of the kernel's ephemeral range. Ports 50051 and 50060-50066 lie inside
    Linux's default range (32768-60999), so any outgoing connection (a stage's client to Weaviate, say) may hold
    one as its local port, and the stage that owns it then cannot bind. Needs root (as in CI); otherwise a rare
    collision stays possible, and the failing stage's log says so."""
    low, high = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    wanted = sorted({p for p in ports if low <= p <= high} | {p for p in PROJECT_PORTS if low <= p <= high})
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
