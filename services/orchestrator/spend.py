"""A model budget per tenant (seed 000's cost-sensitive choice): the tokens each tenant's answers used today, kept in
Redis so that every orchestrator replica counts the same, and the step down as the daily cap comes near — auto's
combined to multi-hop at 75 %, to standard at 90 %, and the offline backends (no model call) once it is spent."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

import redis.asyncio as aioredis
from prometheus_client import Counter

from ragline.v1 import common_pb2

log = logging.getLogger(__name__)

TOKENS = Counter("ragline_tenant_model_tokens_total", "Model tokens spent by answers, per tenant", ["tenant", "kind"])
COST = Counter("ragline_tenant_model_cost_usd_total", "Estimated model cost of answers, per tenant (USD)", ["tenant"])
# (share of the budget spent, the most expensive strategy auto may still use)
STEPS = ((0.9, common_pb2.STRATEGY_STANDARD), (0.75, common_pb2.STRATEGY_MULTIHOP))
# What costs more than what, for capping: a strategy above the cap becomes the cap.
COSTLIER = {common_pb2.STRATEGY_COMBINED: 3, common_pb2.STRATEGY_MULTIHOP: 2, common_pb2.STRATEGY_SELFRAG: 2,
            common_pb2.STRATEGY_STANDARD: 1, common_pb2.STRATEGY_LIGHT: 1, common_pb2.STRATEGY_DIRECT: 0}


@dataclass
class Allowance:
    """What a tenant's answer may use now: models at all, and the costliest strategy auto may pick."""

    models: bool = True
    cap: int = common_pb2.STRATEGY_UNSPECIFIED
    note: str = ""

    @property
    def applies_to_every_answer(self) -> bool:
        """No model, or the budget unchecked: every answer says so. A cap is said only where it changes the strategy."""
        return bool(self.note) and (not self.models or not self.cap)


class TenantSpend:
    def __init__(self, redis_url: str, budgets: dict[str, int], default_budget: int) -> None:
        self.budgets = budgets
        self.default_budget = default_budget
        self.redis = aioredis.Redis.from_url(redis_url, socket_timeout=0.2, socket_connect_timeout=0.2) if redis_url else None

    def budget_of(self, tenant: str) -> int:
        """Tokens per day (0: no cap)."""
        return self.budgets.get(tenant, self.default_budget)

    @staticmethod
    def _key(tenant: str) -> str:
        return f"ragline:model-tokens:{tenant}:{dt.datetime.now(dt.UTC).date().isoformat()}"

    async def allowance(self, tenant: str) -> Allowance:
        budget = self.budget_of(tenant)
        if budget <= 0 or self.redis is None:
            return Allowance()
        try:
            spent = int(await self.redis.get(self._key(tenant)) or 0)
        except Exception as exc:  # Redis down: answer as usual, and say the budget was not checked
            log.warning("model budget of %s not checked: %s", tenant, exc)
            return Allowance(note=f"model budget not checked: Redis unavailable ({type(exc).__name__})")
        share = spent / budget
        where = f"model budget of tenant {tenant}: {spent} of {budget} tokens spent today ({share:.0%})"
        if share >= 1:
            return Allowance(models=False, note=f"{where}: the offline backends answered, no model was called")
        for threshold, cap in STEPS:
            if share >= threshold:
                return Allowance(cap=cap, note=f"{where}: auto may use at most {common_pb2.Strategy.Name(cap)}")
        return Allowance()

    async def add(self, tenant: str, usage: common_pb2.LlmUsage) -> None:
        tokens = usage.prompt_tokens + usage.completion_tokens
        if not tokens:
            return
        TOKENS.labels(tenant, "prompt").inc(usage.prompt_tokens)
        TOKENS.labels(tenant, "completion").inc(usage.completion_tokens)
        COST.labels(tenant).inc(usage.cost_usd)
        if self.redis is None or self.budget_of(tenant) <= 0:
            return
        try:
            key = self._key(tenant)
            async with self.redis.pipeline(transaction=False) as pipe:
                await pipe.incrby(key, tokens).expire(key, 2 * 24 * 3600).execute()
        except Exception as exc:
            log.warning("model spend of %s not recorded: %s", tenant, exc)

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()


def capped(strategy: int, cap: int) -> int:
    """The strategy, or the cap when the strategy costs more."""
    if cap == common_pb2.STRATEGY_UNSPECIFIED or COSTLIER.get(strategy, 0) <= COSTLIER[cap]:
        return strategy
    return cap
