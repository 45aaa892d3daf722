"""The gateway process: the gRPC RaglineService and the HTTP/JSON API in one event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

import grpc
import uvicorn
from fastapi import FastAPI
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

from gateway.backend import Backend
from gateway.config import ApiKeys, GatewaySettings
from gateway.grpc_api import RaglineApi
from gateway.http import create_app
from ragline.runtime.config import RuntimeSettings, load_settings
from ragline.runtime.server import bootstrap, serve
from ragline.v1 import ragline_pb2, ragline_pb2_grpc


@dataclass
class Wiring:
    backend: Backend
    grpc_api: RaglineApi
    http_app: FastAPI


def build(settings: GatewaySettings, runtime: RuntimeSettings, keys: ApiKeys) -> Wiring:
    """Both front ends over one backend (auth, limits, cache and the orchestrator and retrieval clients)."""
    backend = Backend(settings, runtime, keys)
    app = create_app(backend)
    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz,metrics")
    return Wiring(backend, RaglineApi(backend), app)


async def main() -> None:
    runtime = bootstrap("gateway")
    settings = load_settings(GatewaySettings)
    wiring = build(settings, runtime, load_settings(ApiKeys))
    backend, app = wiring.backend, wiring.http_app
    http = uvicorn.Server(uvicorn.Config(app, host=runtime.host, port=settings.http_port, log_config=None,
                                         access_log=False, timeout_graceful_shutdown=int(runtime.shutdown_grace_s)))
    # uvicorn must not install its own signal handlers: the gRPC runtime owns shutdown.
    http.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    http_task = asyncio.create_task(http.serve())

    def register(server: grpc.aio.Server) -> Iterable[str]:
        ragline_pb2_grpc.add_RaglineServiceServicer_to_server(wiring.grpc_api, server)
        return [ragline_pb2.DESCRIPTOR.services_by_name["RaglineService"].full_name]

    async def stop_http() -> None:
        http.should_exit = True
        await http_task
        await backend.close()

    await serve("gateway", settings.port, register, runtime, on_stop=stop_http)
