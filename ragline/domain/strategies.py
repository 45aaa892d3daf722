"""The strategies' public names (HTTP API, CLI, evaluation) and their protobuf values."""

from __future__ import annotations

from ragline.v1 import common_pb2

STRATEGIES: dict[str, int] = {
    "auto": common_pb2.STRATEGY_AUTO,
    "standard": common_pb2.STRATEGY_STANDARD,
    "multihop": common_pb2.STRATEGY_MULTIHOP,
    "selfrag": common_pb2.STRATEGY_SELFRAG,
    "combined": common_pb2.STRATEGY_COMBINED,
}


def strategy_name(value: int) -> str:
    """'standard' for STRATEGY_STANDARD, and so on for every value of the enum (light and direct too)."""
    return common_pb2.Strategy.Name(value).removeprefix("STRATEGY_").lower()
