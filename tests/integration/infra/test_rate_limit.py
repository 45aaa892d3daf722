"""The per-key rate limit in the real Redis: two gateway replicas draw on one bucket; with Redis unreachable each
falls back to a bucket of its own at the same rate (the limit holds per replica)."""

from __future__ import annotations

import uuid

from gateway.limits import RateLimiter


async def test_two_replicas_share_one_bucket():
    key = f"test-{uuid.uuid4().hex}"
    first, second = RateLimiter("redis://127.0.0.1:6379/0", 0.5, 3), RateLimiter("redis://127.0.0.1:6379/0", 0.5, 3)
    try:
        allowed = [await (first if i % 2 else second).allow(key) for i in range(8)]
        assert allowed == [True, True, True, False, False, False, False, False]
        assert await first.allow("another-key")  # buckets are per key
    finally:
        await first.close()
        await second.close()


async def test_without_redis_each_replica_still_limits():
    limiter = RateLimiter("redis://127.0.0.1:1/0", 0.5, 2)
    try:
        assert [await limiter.allow("k") for _ in range(4)] == [True, True, False, False]
    finally:
        await limiter.close()
