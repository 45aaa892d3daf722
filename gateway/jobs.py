"""Ingestion jobs: a large upload is answered at once with a job, ingested in batches in the background, and its
progress and per-document results read from GET /v1/jobs/{id}. Kept in Redis (so that any gateway replica can
answer for it) and in this process (so that a Redis outage loses no job while it runs here)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import redis.asyncio as aioredis

from ragline.domain.documents import batches
from ragline.v1 import retrieval_pb2

log = logging.getLogger(__name__)
# Documents and bytes per ingestion call of a job: progress moves batch by batch.
BATCH_DOCUMENTS = 16
BATCH_BYTES = 16 * 1024 * 1024
_KEPT_HERE = 1000


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class Job:
    id: str
    tenant: str
    status: str = "running"  # running, done, failed
    documents_total: int = 0
    documents_done: int = 0
    chunks_written: int = 0
    documents_failed: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)

    def view(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "tenant"}


def document_size(doc: retrieval_pb2.Document) -> int:
    return len(doc.content) + len(doc.text)


def result_view(r: retrieval_pb2.DocumentResult) -> dict[str, Any]:
    """One document's result as both the synchronous answer and a job report it."""
    view: dict[str, Any] = {"id": r.document_id, "chunks": r.chunks}
    if r.error:
        view["error"] = r.error
    if r.unchanged:
        view["unchanged"] = True
    return view


class JobStore:
    def __init__(self, url: str, enabled: bool, ttl_s: int) -> None:
        self.ttl_s = ttl_s
        self.redis = aioredis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5) if enabled and url else None
        self._here: OrderedDict[str, Job] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    async def _save(self, job: Job) -> None:
        job.updated_at = _now()
        self._here[job.id] = job
        while len(self._here) > _KEPT_HERE:
            self._here.popitem(last=False)
        if self.redis is not None:
            try:
                await self.redis.set(f"ragline:job:{job.id}", json.dumps(asdict(job)), ex=self.ttl_s)
            except Exception as exc:  # the job goes on; this replica still answers for it
                log.warning("job store unavailable: %s", exc)

    async def get(self, tenant: str, job_id: str) -> Job | None:
        """The job, only for its own tenant."""
        job = self._here.get(job_id)
        if job is None and self.redis is not None:
            try:
                raw = await self.redis.get(f"ragline:job:{job_id}")
                job = Job(**json.loads(raw)) if raw else None
            except Exception as exc:
                log.warning("job store unavailable: %s", exc)
        return job if job is not None and job.tenant == tenant else None

    async def start(self, tenant: str, documents: list[retrieval_pb2.Document],
                    ingest: Callable[[list[retrieval_pb2.Document]], Awaitable[retrieval_pb2.IngestResponse]],
                    then: Callable[[], Awaitable[Any]] | None = None) -> Job:
        """Ingest the documents batch by batch in the background, then run `then` (a sync's deletions)."""
        job = Job(id=uuid.uuid4().hex, tenant=tenant, documents_total=len(documents))
        await self._save(job)

        async def run() -> None:
            try:
                for batch in batches(documents, BATCH_DOCUMENTS, BATCH_BYTES, document_size):
                    resp = await ingest(batch)
                    job.results += [result_view(r) for r in resp.results]
                    job.documents_done += len(batch)
                    job.chunks_written += resp.chunks_written
                    job.documents_failed += resp.documents_failed
                    await self._save(job)
                if then is not None:
                    await then()
                job.status = "done"
            except Exception as exc:  # a stage down mid-job: what was done stays done, the rest is reported
                job.status, job.error = "failed", f"{type(exc).__name__}: {exc}"
            await self._save(job)

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.redis is not None:
            await self.redis.aclose()
