from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline.runtime.config import DEFAULT_PORTS


class GeneratorSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_GENERATOR_", extra="ignore")

    port: int = DEFAULT_PORTS["generator"]
    max_sentences: int = Field(3, ge=1, le=20)
    # A sentence must cover this share of the question's content words to be used at all.
    min_sentence_overlap: float = Field(0.3, ge=0.0, le=1.0)
    max_context_chunks: int = Field(8, ge=1, le=50)
    # LLM backend (used when OPENAI_BASE_URL or OPENAI_API_KEY is set).
    llm_model: str = "gpt-4o-mini"
    llm_price_in_per_m: float = Field(0.15, ge=0)
    llm_price_out_per_m: float = Field(0.6, ge=0)
