"""Streaming a task's output while it runs: what the generator (a model's tokens) and the orchestrator (the final
generation's pieces) both do."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any


async def pieces_while_running(task: asyncio.Task[Any], pieces: asyncio.Queue[str]) -> AsyncIterator[str]:
    """Each piece the task puts in the queue, as soon as it is there, until the task is done and the queue empty.
    The task is cancelled if the consumer stops early (the caller went away); its result is the caller's to read."""
    try:
        while not (task.done() and pieces.empty()):
            getter = asyncio.ensure_future(pieces.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
    finally:
        if not task.done():
            task.cancel()
