"""Per-key request rate limit (and per client address, for requests without a valid key): a token bucket (rate per
second, burst) kept in Redis, so that every gateway replica draws on the same bucket (GCRA, one atomic script per
request). When Redis cannot be reached, each replica falls back to a bucket of its own with the same rate: the limit
then holds per replica (neither open nor closed), and a warning says so."""

from __future__ import annotations

import hashlib
import logging
import time

import redis.asyncio as aioredis

log = logging.getLogger(__name__)

# Generic cell rate algorithm: the bucket is the "theoretical arrival time" of the next request, in ms.
_GCRA = """
local now, interval, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
if tat - now > (burst - 1) * interval then return 0 end
local next_tat = tat + interval
redis.call('SET', KEYS[1], next_tat, 'PX', math.ceil(next_tat - now) + 1000)
return 1
"""


class TokenBuckets:
    """Buckets in this process."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate = rate_per_s
        self.burst = float(burst)
        self._state: dict[str, tuple[float, float]] = {}

    def allow(self, key: str) -> bool:
        now = time.monotonic()
        tokens, last = self._state.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        if tokens < 1.0:
            self._state[key] = (tokens, now)
            return False
        self._state[key] = (tokens - 1.0, now)
        return True


class RateLimiter:
    def __init__(self, redis_url: str, rate_per_s: float, burst: int, kind: str = "key") -> None:
        self.interval_ms = 1000.0 / rate_per_s
        self.burst = burst
        # Replicas of one deployment (the same limits) share a bucket; a gateway configured otherwise has its own.
        # kind: what is limited ("key": an API key's requests; "bad-key": a client address's requests without one).
        self.namespace = f"ragline:rate:{kind}:{rate_per_s:g}:{burst}:"
        self.local = TokenBuckets(rate_per_s, burst)
        self.redis = aioredis.Redis.from_url(redis_url, socket_timeout=0.2, socket_connect_timeout=0.2) if redis_url else None
        self._script = self.redis.register_script(_GCRA) if self.redis is not None else None

    async def allow(self, key: str) -> bool:
        if self._script is None:
            return self.local.allow(key)
        # The key (or address) itself is never written to Redis.
        bucket = self.namespace + hashlib.sha256(key.encode()).hexdigest()[:24]
        try:
            return bool(await self._script(keys=[bucket], args=[time.time() * 1000, self.interval_ms, self.burst]))
        except Exception as exc:
            log.warning("rate limit store unavailable (%s): limiting per replica", type(exc).__name__)
            return self.local.allow(key)

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
