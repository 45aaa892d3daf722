"""RAGLINE_ORCHESTRATOR_*: the flows' bounds and sizes."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline.domain.limits import MAX_QUERY_CHARS
from ragline.runtime.config import DEFAULT_PORTS


class OrchestratorSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_ORCHESTRATOR_", extra="ignore")

    port: int = DEFAULT_PORTS["orchestrator"]
    candidates: int = Field(20, ge=1, le=200)
    top_k: int = Field(5, ge=1, le=50)
    light_top_k: int = Field(3, ge=1, le=20)
    max_hops: int = Field(3, ge=1, le=10)
    max_retries: int = Field(3, ge=0, le=10)
    max_query_chars: int = Field(MAX_QUERY_CHARS, ge=1, le=100_000)
    # Share of the remaining budget an adaptive flow may use before standard RAG takes over.
    adaptive_budget_share: float = Field(0.7, gt=0.0, le=1.0)
    # auto's multi-hop takes further hops only when its first retrieval's best passages cover less of the
    # question than this.
    escalation_coverage: float = Field(0.8, ge=0.0, le=1.0)
    escalation_passages: int = Field(3, ge=1, le=20)
    # auto's escalated multi-hop takes at most this many hops (max_hops still caps it). Measured: a third hop
    # costs a retrieval on most escalated MuSiQue questions for 0.008 support recall, and nothing on HotpotQA.
    adaptive_max_hops: int = Field(2, ge=1, le=10)
    # A bridge hop's query names the entity it looks for; measured, reranking its candidates costs a stage call
    # per hop for no recall on HotpotQA (0.920 either way) and 0.011 on MuSiQue.
    # (Graded flows too: measured, the grader's reranker probability on those hops bought nothing for 1.3 more
    # calls per question; their passages are graded by word coverage instead.)
    rerank_bridge_hops: bool = False
    # Tenants whose searches keep the fused hybrid order instead of the reranker's, as JSON ({"catalog": false}):
    # measured, the reranker costs an entity-name corpus (BEIR DBpedia: -0.015 nDCG@10) what it gains on passages.
    tenant_rerank: dict[str, bool] = Field(default_factory=dict)
    # Kept back from the caller's deadline to assemble the answer after the last stage call.
    finish_reserve_ms: int = Field(100, ge=0, le=10_000)
    # Model tokens per tenant per day (0: no cap), and per tenant as JSON ({"acme": 200000}); spend is counted in
    # Redis, shared by every replica. Near the cap auto steps down; once it is spent, no model is called.
    model_tokens_per_day: int = Field(0, ge=0)
    tenant_model_tokens_per_day: dict[str, int] = Field(default_factory=dict)
    redis_url: str = "redis://127.0.0.1:6379/0"
    # Web-search fallback for self-RAG (Tavily's API): off unless a key is set.
    web_search_api_key: str = ""
    web_search_url: str = "https://api.tavily.com"
    web_search_results: int = Field(3, ge=1, le=20)
