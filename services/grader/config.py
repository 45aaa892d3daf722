from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ragline.runtime.config import DEFAULT_PORTS, LlmStageSettings


class GraderSettings(LlmStageSettings):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_GRADER_", extra="ignore")

    port: int = DEFAULT_PORTS["grader"]
    # A reranked document is relevant when the reranker's calibrated probability reaches this; one without
    # a probability when this share of the query's content words occurs in it.
    min_relevance_probability: float = Field(0.5, ge=0.0, le=1.0)
    min_relevance: float = Field(0.5, ge=0.0, le=1.0)
    # An answer is supported when this share of its content words occurs in the context.
    min_support: float = Field(0.7, ge=0.0, le=1.0)
    min_usefulness: float = Field(0.3, ge=0.0, le=1.0)
    # Majority vote over this many calls per grade (1: no vote).
    llm_votes: int = Field(1, ge=1, le=7)
