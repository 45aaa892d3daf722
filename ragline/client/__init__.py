"""Talking to a running gateway: what the CLI, the demo and scripts share."""

from __future__ import annotations

import os

import grpc

from ragline.runtime.config import DEFAULT_PORTS
from ragline.v1 import ragline_pb2_grpc

# The key `make up` configures for local development (tenant "default").
DEV_KEY = "ragline-dev-key"


def gateway_stub() -> tuple[ragline_pb2_grpc.RaglineServiceStub, list[tuple[str, str]]]:
    """A stub for RAGLINE_GATEWAY (default: the local gateway) and the metadata carrying RAGLINE_API_KEY."""
    address = os.environ.get("RAGLINE_GATEWAY", f"127.0.0.1:{DEFAULT_PORTS['gateway']}")
    key = os.environ.get("RAGLINE_API_KEY", DEV_KEY)
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
    return ragline_pb2_grpc.RaglineServiceStub(channel), [("authorization", f"Bearer {key}")]
