"""Failure injection for fault drills (RAGLINE_FAULT_*): the stage's own calls fail or wait, its health service does
not, as a stage that answers badly still reports SERVING."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ragline.runtime.config import RuntimeSettings
from ragline.runtime.server import _ErrorHygiene, _InjectedFaults


async def _echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return request


async def _call(settings: RuntimeSettings, timeout: float = 5) -> tuple[grpc.StatusCode, str, int]:
    server = grpc.aio.server(interceptors=[_ErrorHygiene("test", _InjectedFaults(settings))])
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
        "test.Echo", {"Say": grpc.unary_unary_rpc_method_handler(_echo)})])
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
            try:
                await channel.unary_unary("/test.Echo/Say")(b"hi", timeout=timeout)
                return grpc.StatusCode.OK, "", reply.status
            except grpc.aio.AioRpcError as exc:
                return exc.code(), exc.details() or "", reply.status
    finally:
        await server.stop(0)


@pytest.mark.parametrize(("env", "timeout", "code"), [
    ({}, 5, grpc.StatusCode.OK),
    ({"fault_error_rate": 1.0}, 5, grpc.StatusCode.UNAVAILABLE),
    ({"fault_delay_ms": 2000}, 0.3, grpc.StatusCode.DEADLINE_EXCEEDED),
])
def test_injected_faults_hit_the_stages_calls_and_spare_its_health(env: dict, timeout: float, code: grpc.StatusCode) -> None:
    got, details, serving = asyncio.run(_call(RuntimeSettings(**env), timeout))
    assert got == code, details
    assert serving == health_pb2.HealthCheckResponse.SERVING
    if code == grpc.StatusCode.UNAVAILABLE:
        assert "injected fault" in details
