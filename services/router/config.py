from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline.runtime.config import DEFAULT_PORTS


class RouterSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_ROUTER_", extra="ignore")

    port: int = DEFAULT_PORTS["router"]
    # Rules at least this confident decide alone (the fast path).
    fast_path_confidence: float = Field(0.8, ge=0.0, le=1.0)
    # The learned classifier's P(multi-hop) from which a question goes to the multi-hop flow.
    multihop_threshold: float = Field(0.5, ge=0.0, le=1.0)
    # The LLM backend is used when OPENAI_BASE_URL or OPENAI_API_KEY is set.
    llm_model: str = "gpt-4o-mini"
    llm_price_in_per_m: float = Field(0.15, ge=0)
    llm_price_out_per_m: float = Field(0.6, ge=0)
