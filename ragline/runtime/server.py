"""Serving: a grpc.aio server with health, reflection, error hygiene and graceful shutdown."""

from __future__ import annotations

import asyncio
import logging
import random
import signal
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from ragline.runtime.caches import cache_dir, configure_jieba
from ragline.runtime.call_context import enter_call
from ragline.runtime.config import RuntimeSettings, load_settings
from ragline.runtime.errors import StatusError
from ragline.runtime.logs import setup_logging
from ragline.runtime.metrics import GRPC_HANDLED, GRPC_IN_FLIGHT, GRPC_SECONDS, METRICS_PORTS, serve_metrics
from ragline.runtime.tracing import setup_tracing, shutdown_tracing

log = logging.getLogger(__name__)


class _Call:
    """One call's metrics: in flight while it runs, then its latency and status code."""

    def __init__(self, service: str, method: str, context: grpc.aio.ServicerContext) -> None:
        self.labels = (service, method.rsplit("/", 1)[-1])
        self.context = context

    def __enter__(self) -> _Call:
        self.started = time.perf_counter()
        GRPC_IN_FLIGHT.labels(*self.labels).inc()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        GRPC_IN_FLIGHT.labels(*self.labels).dec()
        GRPC_SECONDS.labels(*self.labels).observe(time.perf_counter() - self.started)
        if kind is None:
            code = "OK"
        elif issubclass(kind, asyncio.CancelledError):
            code = "CANCELLED"
        else:
            # An abort set the call's code; anything else became INTERNAL.
            set_code = self.context.code() if isinstance(exc, grpc.aio.AbortError) else grpc.StatusCode.INTERNAL
            code = set_code.name if isinstance(set_code, grpc.StatusCode) else "UNKNOWN"
        GRPC_HANDLED.labels(*self.labels, code).inc()


class _InjectedFaults:
    """RAGLINE_FAULT_DELAY_MS and RAGLINE_FAULT_ERROR_RATE: a slow or failing stage on purpose, for fault drills. The
    health service is spared, so that a stage that answers badly still looks SERVING, as such stages do."""

    def __init__(self, settings: RuntimeSettings) -> None:
        self.delay_s = settings.fault_delay_ms / 1000
        self.error_rate = settings.fault_error_rate
        if self.delay_s or self.error_rate:
            log.warning("fault injection on: every call waits %.0f ms, %.0f%% answered UNAVAILABLE",
                        settings.fault_delay_ms, self.error_rate * 100)

    def __bool__(self) -> bool:
        return bool(self.delay_s or self.error_rate)

    async def apply(self, method: str, context: grpc.aio.ServicerContext) -> None:
        if method.startswith("/grpc."):
            return
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.error_rate and random.random() < self.error_rate:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "injected fault (RAGLINE_FAULT_ERROR_RATE)")


class _ErrorHygiene(grpc.aio.ServerInterceptor):
    """Unexpected exceptions become INTERNAL with a short message; the stack trace goes to the log only. Every call
    is counted, timed and its status recorded (runtime/metrics.py)."""

    def __init__(self, service: str, faults: _InjectedFaults) -> None:
        self.service = service
        self.faults = faults

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        if handler.unary_unary:
            inner_uu = handler.unary_unary

            async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                enter_call(context)
                with _Call(self.service, method, context):
                    try:
                        if self.faults:
                            await self.faults.apply(method, context)
                        return await inner_uu(request, context)
                    except Exception as exc:
                        await _abort_internal(context, method, exc)

            return grpc.unary_unary_rpc_method_handler(
                unary_unary, handler.request_deserializer, handler.response_serializer
            )
        if handler.unary_stream:
            inner_us = handler.unary_stream

            async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
                enter_call(context)
                with _Call(self.service, method, context):
                    try:
                        if self.faults:
                            await self.faults.apply(method, context)
                        async for item in inner_us(request, context):
                            yield item
                    except Exception as exc:
                        await _abort_internal(context, method, exc)

            return grpc.unary_stream_rpc_method_handler(
                unary_stream, handler.request_deserializer, handler.response_serializer
            )
        return handler


async def _abort_internal(context: grpc.aio.ServicerContext, method: str, exc: Exception) -> None:
    # context.abort() raises an AbortError that must pass through untouched.
    if isinstance(exc, grpc.aio.AbortError):
        raise exc
    if isinstance(exc, StatusError):  # an expected failure, with its own status and reason
        log.warning("%s failed: %s", method, exc.message)
        await context.abort(exc.code, exc.message)
    log.exception("unhandled error in %s", method)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}: {type(exc).__name__}")


Register = Callable[[grpc.aio.Server], Iterable[str]]


async def serve(
    service: str,
    port: int,
    register: Register,
    settings: RuntimeSettings,
    on_stop: Callable[[], Awaitable[None]] | None = None,
    ready: asyncio.Event | None = None,
    depends_on: Callable[[], Awaitable[bool]] | None = None,
) -> None:
    """Run a service until SIGTERM/SIGINT, then drain in-flight calls for up to shutdown_grace_s. depends_on: what
    the service cannot answer without (retrieval: Weaviate), checked every second; while it fails, the health
    service says NOT_SERVING, so that callers' breakers stay open until it is back and close as soon as it is."""
    server = grpc.aio.server(
        interceptors=[_ErrorHygiene(service, _InjectedFaults(settings))],
        maximum_concurrent_rpcs=settings.max_concurrent_rpcs,
        options=[
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
        ],
    )
    names = list(register(server))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME], server
    )
    address = f"{settings.host}:{port}"
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise SystemExit(f"ragline-{service}: cannot bind {address}: another process listens there, or an outgoing "
                         "connection holds it as its local port (it is inside the kernel's ephemeral range: reserve it "
                         "in net.ipv4.ip_local_reserved_ports, as `make up` does as root)")
    serve_metrics(service, settings.host, settings.metrics_port if settings.metrics_port is not None else METRICS_PORTS.get(service, 0))
    await server.start()
    for name in ["", *names]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("ragline-%s serving on %s", service, address)
    if ready is not None:
        ready.set()

    stop = asyncio.Event()
    watcher = asyncio.create_task(_watch(depends_on, health_servicer, ["", *names], stop)) if depends_on else None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()

    log.info("ragline-%s shutting down: draining for up to %.1fs", service, settings.shutdown_grace_s)
    if watcher is not None:
        watcher.cancel()
    # Report NOT_SERVING first so load balancers stop sending new calls.
    await health_servicer.enter_graceful_shutdown()
    await server.stop(settings.shutdown_grace_s)
    if on_stop is not None:
        await on_stop()
    shutdown_tracing()


async def _watch(depends_on: Callable[[], Awaitable[bool]], health_servicer: health.aio.HealthServicer,
                 names: list[str], stop: asyncio.Event) -> None:
    serving = True
    while not stop.is_set():
        await asyncio.sleep(1.0)
        try:
            ok = await asyncio.wait_for(depends_on(), timeout=1.0)
        except Exception:
            ok = False
        if ok != serving:
            serving = ok
            log.warning("dependency %s: health now %s", "back" if ok else "down", "SERVING" if ok else "NOT_SERVING")
            status = health_pb2.HealthCheckResponse.SERVING if ok else health_pb2.HealthCheckResponse.NOT_SERVING
            for name in names:
                await health_servicer.set(name, status)


def bootstrap(service: str) -> RuntimeSettings:
    """Shared settings, logs, tracing and the cache folder for one service process."""
    settings = load_settings(RuntimeSettings)
    setup_logging(service, settings.log_level)
    setup_tracing(service, settings)
    configure_jieba(cache_dir(settings))
    return settings
