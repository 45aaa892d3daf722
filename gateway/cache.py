"""Answer cache in Redis, with a TTL by query type. Ingesting into a tenant bumps its generation,
so no cached answer outlives a change to the tenant's documents."""

from __future__ import annotations

import hashlib
import logging

import redis.asyncio as aioredis

from ragline.v1 import common_pb2

log = logging.getLogger(__name__)

# Seconds, by query type: facts change rarely, verified answers should be re-checked sooner,
# creative and chit-chat answers are not cached.
TTL_BY_TYPE = {
    common_pb2.QUERY_TYPE_SIMPLE_FACT: 24 * 3600,
    common_pb2.QUERY_TYPE_COMPLEX_REASONING: 4 * 3600,
    common_pb2.QUERY_TYPE_NEEDS_VERIFICATION: 3600,
    common_pb2.QUERY_TYPE_OPEN_CREATIVE: 0,
    common_pb2.QUERY_TYPE_NO_RETRIEVAL: 0,
}
# When the caller chose the strategy there is no query type; cache for the shortest useful time.
DEFAULT_TTL = 3600


class AnswerCache:
    def __init__(self, url: str, enabled: bool) -> None:
        self.enabled = enabled and bool(url)
        self.redis = aioredis.Redis.from_url(url, socket_timeout=0.2, socket_connect_timeout=0.2) if self.enabled else None

    async def _key(self, tenant: str, strategy: int, query: str, filters: str) -> str:
        assert self.redis is not None
        generation = await self.redis.get(f"ragline:gen:{tenant}") or b"0"
        digest = hashlib.sha256(f"{strategy}\x00{' '.join(query.split()).lower()}\x00{filters}".encode()).hexdigest()
        return f"ragline:answer:{tenant}:{generation.decode()}:{digest}"

    async def get(self, tenant: str, strategy: int, query: str, filters: str) -> common_pb2.Answer | None:
        if self.redis is None:
            return None
        try:
            raw = await self.redis.get(await self._key(tenant, strategy, query, filters))
        except Exception as exc:  # a cache outage must never fail a request
            log.warning("answer cache unavailable: %s", exc)
            return None
        return common_pb2.Answer.FromString(raw) if raw else None

    async def put(self, tenant: str, strategy: int, query: str, filters: str, answer: common_pb2.Answer) -> None:
        if self.redis is None or answer.degradations or answer.not_found:
            return
        ttl = TTL_BY_TYPE.get(answer.query_type, DEFAULT_TTL) if answer.query_type else DEFAULT_TTL
        if ttl <= 0:
            return
        try:
            await self.redis.set(await self._key(tenant, strategy, query, filters), answer.SerializeToString(), ex=ttl)
        except Exception as exc:
            log.warning("answer cache unavailable: %s", exc)

    async def invalidate(self, tenant: str) -> None:
        if self.redis is None:
            return
        try:
            await self.redis.incr(f"ragline:gen:{tenant}")
        except Exception as exc:
            log.warning("answer cache invalidation failed for %s: %s", tenant, exc)

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
