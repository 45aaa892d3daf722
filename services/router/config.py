from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ragline.runtime.config import DEFAULT_PORTS, LlmStageSettings


class RouterSettings(LlmStageSettings):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_ROUTER_", extra="ignore")

    port: int = DEFAULT_PORTS["router"]
    # Rules at least this confident decide alone (the fast path).
    fast_path_confidence: float = Field(0.8, ge=0.0, le=1.0)
    # The learned classifier's P(multi-hop) from which a question goes to the multi-hop flow.
    multihop_threshold: float = Field(0.5, ge=0.0, le=1.0)
    # Sub-questions at most in the decomposition an offline router returns with a multi-hop route.
    max_sub_questions: int = Field(3, ge=1, le=10)
