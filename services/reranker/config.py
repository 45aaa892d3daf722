from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline.runtime.config import DEFAULT_PORTS


class RerankerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_RERANKER_", extra="ignore")

    port: int = DEFAULT_PORTS["reranker"]
    # "learned" (the offline default, services/reranker/models/features-lr.json), "learned:<path>",
    # or "cross-encoder:<hf id or local path>" (needs sentence-transformers and torch).
    model: str = "learned"
    default_top_k: int = Field(5, ge=1, le=100)
    max_candidates: int = Field(100, ge=1, le=1000)
    max_length: int = Field(256, ge=16, le=4096)
    batch_size: int = Field(32, ge=1, le=512)
