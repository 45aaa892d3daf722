"""What a stage knows of the call it serves, beyond the request: the caller's deadline and whether the caller
allows model calls. Set for every RPC by the server's interceptor (runtime/server.py) and passed on by every stage
client (runtime/clients.py), so that code deep in a stage — a model call above all — can keep to both."""

from __future__ import annotations

import contextvars
import time

import grpc

# The metadata that says a call must not use a model (a tenant's model budget is spent): the offline backends answer.
MODELS_HEADER = "ragline-models"
CALL_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("ragline_call_deadline", default=None)
MODELS_OFF: contextvars.ContextVar[bool] = contextvars.ContextVar("ragline_models_off", default=False)


def enter_call(context: grpc.aio.ServicerContext) -> None:
    remaining = context.time_remaining()
    CALL_DEADLINE.set(None if remaining is None else time.monotonic() + remaining)
    metadata = dict(context.invocation_metadata() or ())
    MODELS_OFF.set(metadata.get(MODELS_HEADER) == "off")


def call_time_left() -> float | None:
    """Seconds until the current call's deadline (None without one)."""
    expires = CALL_DEADLINE.get()
    return None if expires is None else expires - time.monotonic()


def outgoing_metadata() -> tuple[tuple[str, str], ...]:
    """What a downstream call carries of this call's context."""
    return ((MODELS_HEADER, "off"),) if MODELS_OFF.get() else ()
