"""Deadline budgets: every downstream call gets what is left of the caller's deadline."""

from __future__ import annotations

import time

import grpc


class BudgetExhausted(Exception):
    """No time is left to start another downstream call."""


class Budget:
    """An absolute deadline on the monotonic clock, created from the incoming call."""

    def __init__(self, seconds: float, margin_s: float = 0.02) -> None:
        self.expires_at = time.monotonic() + max(0.0, seconds)
        self.margin_s = margin_s

    @classmethod
    def from_context(
        cls, context: grpc.aio.ServicerContext, default_s: float, margin_s: float, reserve_s: float = 0.0
    ) -> Budget:
        """The caller's remaining time, less reserve_s kept back to assemble and send the response."""
        remaining = context.time_remaining()
        # A caller without a deadline still gets a bounded call; a caller's own deadline is kept, longer or shorter
        # (the gateway bounds what its callers may ask for).
        seconds = default_s if remaining is None else remaining
        return cls(seconds - min(reserve_s, seconds * 0.2), margin_s)

    def remaining(self) -> float:
        return self.expires_at - time.monotonic()

    def expired(self) -> bool:
        return self.remaining() <= self.margin_s

    def timeout(self, cap_s: float | None = None) -> float:
        """The timeout for the next downstream call, or BudgetExhausted when none is left."""
        left = self.remaining() - self.margin_s
        if left <= 0:
            raise BudgetExhausted(f"deadline budget exhausted ({left * 1000:.0f} ms left)")
        return min(left, cap_s) if cap_s else left

    def child(self, fraction: float) -> Budget:
        """A share of what is left, for work that must leave time for what follows."""
        share = Budget(self.remaining() * fraction, self.margin_s)
        return share
