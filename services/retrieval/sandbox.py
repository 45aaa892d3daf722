"""Parser processes: every file that is not text is parsed in a separate process with a memory cap and a time
limit, so that a corrupt, hostile or enormous file costs a worker (killed and replaced), never the service."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import multiprocessing.pool
import resource
import threading
from collections.abc import Callable

from services.retrieval import formats
from services.retrieval.formats import Parsed, ParseError

log = logging.getLogger(__name__)


def _limit_memory(max_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))


class ParserPool:
    def __init__(self, workers: int, timeout_s: float, memory_bytes: int,
                 target: Callable[[bytes, str, str], Parsed] = formats.parse) -> None:
        # target: a module-level function (the spawned workers import it by name).
        self.target = target
        self.workers = workers
        self.timeout_s = timeout_s
        self.memory_bytes = memory_bytes
        self._pool: multiprocessing.pool.Pool | None = None
        self._lock = threading.Lock()

    def _get(self) -> multiprocessing.pool.Pool:
        with self._lock:
            if self._pool is None:
                # spawn, not fork: the service's threads (gRPC, the embedder) must not be forked.
                self._pool = multiprocessing.get_context("spawn").Pool(
                    self.workers, initializer=_limit_memory, initargs=(self.memory_bytes,), maxtasksperchild=200)
            return self._pool

    def _reset(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.terminate()
                self._pool = None

    def _parse(self, content: bytes, fmt: str, title: str) -> Parsed:
        pending = self._get().apply_async(self.target, (content, fmt, title))
        try:
            return pending.get(self.timeout_s)
        except multiprocessing.TimeoutError:
            # A worker that overran (or died: the pool would wait for it forever) is killed with the pool.
            log.warning("parser overran %.0f s on a %s file: restarting the parser processes", self.timeout_s, fmt)
            self._reset()
            raise ParseError(f"parsing took over {self.timeout_s:g} s: gave up (a damaged or hostile file?)") from None
        except MemoryError:
            raise ParseError(f"the {fmt.upper()} file needs more memory to parse than a parser may use") from None

    async def parse(self, content: bytes, fmt: str, title: str) -> Parsed:
        return await asyncio.to_thread(self._parse, content, fmt, title)

    def close(self) -> None:
        self._reset()
