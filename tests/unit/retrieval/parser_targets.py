"""Parse functions that misbehave, run by the parser processes in tests (spawned workers import them by name)."""

from __future__ import annotations

import time

from services.retrieval.formats import Parsed


def hang(content: bytes, fmt: str, title: str) -> Parsed:
    time.sleep(3600)
    raise AssertionError("unreachable")


def exhaust_memory(content: bytes, fmt: str, title: str) -> Parsed:
    hoard = []
    while True:
        hoard.append(bytearray(64 * 1024 * 1024))


def crash(content: bytes, fmt: str, title: str) -> Parsed:
    import os

    os._exit(1)
