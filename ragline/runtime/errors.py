"""An error that carries the gRPC status it should be reported with."""

from __future__ import annotations

import grpc


class StatusError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
