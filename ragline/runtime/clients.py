"""Breaker-wrapped, deadline-bounded clients for the downstream stages."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import grpc
import pybreaker
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry import trace

from ragline.runtime.call_context import outgoing_metadata
from ragline.runtime.config import RuntimeSettings
from ragline.runtime.deadlines import Budget, BudgetExhausted
from ragline.runtime.metrics import BREAKER_LEVEL, BREAKER_STATE

log = logging.getLogger(__name__)

# Codes that mean the stage itself is unhealthy; anything else is the caller's problem.
_FAILURE_CODES = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNIMPLEMENTED,
}

# Health probes of a stage whose breaker is open: first after this, doubling up to the max (well within 5 s of
# the stage serving again).
PROBE_FIRST_S = 0.1
PROBE_MAX_S = 1.0
PROBE_TIMEOUT_S = 0.5

# Large enough for an ingest batch of long documents.
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class StageUnavailable(Exception):
    """A stage could not answer: its breaker is open, the call failed, or no time was left."""

    def __init__(self, stage: str, reason: str, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE) -> None:
        super().__init__(f"{stage} {reason}")
        self.stage = stage
        self.reason = reason
        self.code = code


def _is_caller_error(exc: BaseException) -> bool:
    return isinstance(exc, grpc.aio.AioRpcError) and exc.code() not in _FAILURE_CODES


class _BreakerTelemetry(pybreaker.CircuitBreakerListener):
    def state_change(self, cb: pybreaker.CircuitBreaker, old_state: Any, new_state: Any) -> None:
        BREAKER_STATE.labels(cb.name or "").set(BREAKER_LEVEL.get(new_state.name, 2))
        old = old_state.name if old_state else "none"
        log.warning("circuit breaker %s: %s -> %s", cb.name, old, new_state.name)
        trace.get_current_span().add_event(
            "breaker.state_change", {"breaker": cb.name or "", "from": old, "to": new_state.name}
        )


class _OnOpen(pybreaker.CircuitBreakerListener):
    def __init__(self, opened: Callable[[], None]) -> None:
        self.opened = opened

    def state_change(self, cb: pybreaker.CircuitBreaker, old_state: Any, new_state: Any) -> None:
        if new_state.name == pybreaker.STATE_OPEN:
            self.opened()


def make_breaker(name: str, settings: RuntimeSettings, on_open: Callable[[], None] | None = None) -> pybreaker.CircuitBreaker:
    storage: pybreaker.CircuitBreakerStorage | None = None
    if settings.breaker_redis_url:
        import redis

        storage = pybreaker.CircuitRedisStorage(
            pybreaker.STATE_CLOSED, redis.Redis.from_url(settings.breaker_redis_url), namespace=f"ragline:{name}"
        )
    BREAKER_STATE.labels(name).set(0)
    return pybreaker.CircuitBreaker(
        fail_max=settings.breaker_fail_max,
        reset_timeout=settings.breaker_reset_timeout_s,
        exclude=[_is_caller_error],
        listeners=[_BreakerTelemetry(), *([_OnOpen(on_open)] if on_open else [])],
        state_storage=storage,
        name=name,
    )


def channel_target(addresses: list[str]) -> str:
    """One address is used as given (a DNS name may resolve to many pods); several become a static list."""
    if len(addresses) == 1:
        return addresses[0]
    return "ipv4:" + ",".join(addresses)


StubT = TypeVar("StubT")


# A server that comes back is reconnected to within a second, not after gRPC's default backoff (1 s growing by 1.6x
# to two minutes: after 20 s down the next try is up to 10 s away). Every gRPC channel to a server that may restart.
FAST_RECONNECT: list[tuple[str, int]] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


class StageClient(Generic[StubT]):
    """One stage's channel (round-robin over its replicas), stub and circuit breaker."""

    def __init__(self, stage: str, stub_cls: type[StubT], settings: RuntimeSettings) -> None:
        self.stage = stage
        self.addresses = settings.addresses(stage)
        self.channel = grpc.aio.insecure_channel(
            channel_target(self.addresses),
            options=[
                ("grpc.lb_policy_name", "round_robin"),
                ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
                ("grpc.keepalive_time_ms", 30_000),
                *FAST_RECONNECT,
            ],
        )
        self.stub: StubT = stub_cls(self.channel)  # type: ignore[call-arg]
        self.breaker = make_breaker(stage, settings, on_open=self._probe_while_open)
        self._probe: asyncio.Task[None] | None = None

    def _probe_while_open(self) -> None:
        """Recovery driven by health, not by the breaker's timer: while the breaker is open the stage's gRPC health
        service is asked, with backoff, and the breaker closes as soon as it answers SERVING."""
        if self._probe is not None and not self._probe.done():
            return
        try:
            self._probe = asyncio.get_running_loop().create_task(self._probe_until_serving())
        except RuntimeError:  # no event loop (a synchronous caller): the breaker's own timer still applies
            pass

    async def _probe_until_serving(self) -> None:
        health = health_pb2_grpc.HealthStub(self.channel)
        delay = PROBE_FIRST_S
        while self.breaker.current_state != pybreaker.STATE_CLOSED:
            await asyncio.sleep(delay)
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=PROBE_TIMEOUT_S)
            except grpc.aio.AioRpcError:
                reply = None
            if reply is not None and reply.status == health_pb2.HealthCheckResponse.SERVING:
                log.warning("%s reports SERVING: closing its circuit breaker", self.stage)
                self.breaker.close()
                return
            delay = min(delay * 2, PROBE_MAX_S)

    @property
    def state(self) -> str:
        return self.breaker.current_state

    async def call(self, method: str, request: Any, budget: Budget, cap_s: float | None = None) -> Any:
        """Call one unary RPC within the budget; StageUnavailable when the stage cannot answer."""
        span = trace.get_current_span()
        span.set_attribute(f"ragline.breaker.{self.stage}", self.breaker.current_state)
        try:
            timeout = budget.timeout(cap_s)
        except BudgetExhausted as exc:
            raise StageUnavailable(self.stage, "skipped: deadline budget exhausted", grpc.StatusCode.DEADLINE_EXCEEDED) from exc
        try:
            with self.breaker.calling():
                return await getattr(self.stub, method)(request, timeout=timeout, metadata=outgoing_metadata())
        except pybreaker.CircuitBreakerError as exc:
            raise StageUnavailable(self.stage, "skipped: circuit open") from exc
        except grpc.aio.AioRpcError as exc:
            if exc.code() in _FAILURE_CODES:
                raise StageUnavailable(self.stage, f"failed: {exc.code().name}", exc.code()) from exc
            raise

    def stream(self, method: str, request: Any, budget: Budget) -> Any:
        """Open a server-streaming call within the budget; breaker state is checked first."""
        if self.breaker.current_state == pybreaker.STATE_OPEN:
            raise StageUnavailable(self.stage, "skipped: circuit open")
        try:
            timeout = budget.timeout()
        except BudgetExhausted as exc:
            raise StageUnavailable(self.stage, "skipped: deadline budget exhausted", grpc.StatusCode.DEADLINE_EXCEEDED) from exc
        return getattr(self.stub, method)(request, timeout=timeout, metadata=outgoing_metadata())

    async def close(self) -> None:
        await self.channel.close()
