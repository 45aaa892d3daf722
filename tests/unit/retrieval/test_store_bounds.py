"""Every Weaviate call of retrieval is bounded: by the store's timeout (UNAVAILABLE: Weaviate is not answering) or,
when shorter, by the caller's time left (DEADLINE_EXCEEDED: the caller's budget ran out, Weaviate may be fine)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from ragline.runtime.errors import StatusError
from services.retrieval.store import ChunkStore


def _store(timeout_s: float) -> ChunkStore:
    return ChunkStore(client=None, collection="RaglineChunk", timeout_s=timeout_s)  # type: ignore[arg-type]


async def test_a_call_past_the_store_timeout_is_unavailable():
    with pytest.raises(StatusError) as caught:
        await _store(0.05).bounded(asyncio.sleep(5))
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE and "did not answer within" in caught.value.message


async def test_a_call_past_the_callers_deadline_is_deadline_exceeded():
    for left in (0.05, 0.0, -1.0):  # also a deadline already gone
        with pytest.raises(StatusError) as caught:
            await _store(10).bounded(asyncio.sleep(5), left)
        assert caught.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_a_call_within_both_returns_its_result():
    async def answer() -> str:
        await asyncio.sleep(0.01)
        return "hits"

    assert await _store(1).bounded(answer(), 5.0) == "hits"
