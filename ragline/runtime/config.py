"""Configuration from environment variables, validated at start-up."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TypeVar

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline.structured_output import Setting

# Fixed, documented default ports of the mesh.
DEFAULT_PORTS = {
    "gateway": 50060,
    "router": 50061,
    "retrieval": 50062,
    "reranker": 50063,
    "grader": 50064,
    "generator": 50065,
    "orchestrator": 50066,
}
GATEWAY_HTTP_PORT = 8000


class RuntimeSettings(BaseSettings):
    """Settings every service reads (RAGLINE_*); each service has its own besides (RAGLINE_<SERVICE>_*)."""

    model_config = SettingsConfigDict(env_prefix="RAGLINE_", extra="ignore")

    host: str = "127.0.0.1"
    log_level: str = Field("INFO", pattern="^(DEBUG|INFO|WARNING|ERROR)$")
    # The standard OpenTelemetry variable is honoured too.
    otlp_endpoint: str = Field(
        "http://127.0.0.1:4317", validation_alias=AliasChoices("RAGLINE_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    tracing: bool = True
    # Fraction of new traces kept; child spans follow their parent's decision.
    trace_sample_ratio: float = Field(1.0, ge=0.0, le=1.0)
    # How often finished spans are sent to the collector.
    trace_export_delay_ms: int = Field(1000, ge=10, le=60_000)
    # Kept back from each downstream call's budget so the caller has time to answer.
    deadline_margin_ms: int = Field(20, ge=0, le=10_000)
    # Used when a call arrives without a deadline: no call is ever unbounded.
    default_deadline_ms: int = Field(30_000, ge=100, le=600_000)
    breaker_fail_max: int = Field(5, ge=1, le=1000)
    breaker_reset_timeout_s: float = Field(30.0, gt=0, le=3600)
    # When set, breaker state is shared across replicas through Redis.
    breaker_redis_url: str = ""
    shutdown_grace_s: float = Field(10.0, ge=0, le=300)
    # RPCs one process serves at once; past it a call is answered RESOURCE_EXHAUSTED at once (429 at the gateway)
    # instead of queueing past every deadline.
    max_concurrent_rpcs: int = Field(256, ge=1, le=100_000)
    # Failure injection for fault drills (`make chaos`, the mesh tests); leave unset in production. Every RPC but
    # the health service's waits fault_delay_ms first, and a fault_error_rate share of them is answered UNAVAILABLE.
    fault_delay_ms: int = Field(0, ge=0, le=600_000)
    fault_error_rate: float = Field(0.0, ge=0.0, le=1.0)
    # This process's /metrics port; unset: the stage's documented port (ragline/runtime/metrics.py), 0: none.
    metrics_port: int | None = Field(None, ge=0, le=65535)
    # Where caches are written (embedding vectors, jieba's dictionary): empty for <temp dir>/ragline, "off" for none.
    cache_dir: str = ""
    # Tenant -> glossary file of synonym groups (ragline/domain/glossary.py), as JSON: {"default": "glossary.txt"}.
    # Retrieval's keyword search and the offline generator read the same files.
    glossaries: dict[str, str] = Field(default_factory=dict)
    router_addresses: str = f"127.0.0.1:{DEFAULT_PORTS['router']}"
    retrieval_addresses: str = f"127.0.0.1:{DEFAULT_PORTS['retrieval']}"
    reranker_addresses: str = f"127.0.0.1:{DEFAULT_PORTS['reranker']}"
    grader_addresses: str = f"127.0.0.1:{DEFAULT_PORTS['grader']}"
    generator_addresses: str = f"127.0.0.1:{DEFAULT_PORTS['generator']}"
    orchestrator_addresses: str = f"127.0.0.1:{DEFAULT_PORTS['orchestrator']}"

    @field_validator("glossaries")
    @classmethod
    def _glossaries_exist(cls, value: dict[str, str]) -> dict[str, str]:
        missing = {t: p for t, p in value.items() if not Path(p).is_file()}
        if missing:
            raise ValueError(f"glossary files not found: {missing}")
        return value

    def addresses(self, stage: str) -> list[str]:
        raw: str = getattr(self, f"{stage}_addresses")
        return [a.strip() for a in raw.split(",") if a.strip()]


class LlmStageSettings(BaseSettings):
    """The LLM backend of a stage that thinks, used when OPENAI_BASE_URL or OPENAI_API_KEY is set.
    A stage's settings class inherits these under its own prefix, e.g. RAGLINE_GRADER_LLM_MODEL."""

    llm_model: str = "gpt-4o-mini"
    # USD per million tokens, for the cost estimate.
    llm_price_in_per_m: float = Field(0.15, ge=0)
    llm_price_out_per_m: float = Field(0.6, ge=0)
    # Model calls one service process makes at once.
    llm_max_concurrent: int = Field(8, ge=1, le=256)
    # The longest a model call may take (the caller's deadline may cut it shorter).
    llm_timeout_s: float = Field(30.0, gt=0, le=600)
    # The longest answer a call may produce: bounds cost, and the time a server spends on a caller that gave up.
    llm_max_tokens: int = Field(512, ge=16, le=32768)
    # How structured answers are asked for (ragline/structured_output.py): "auto" steps down from json_schema to
    # json_object to a prompt as the server refuses; one for every stage.
    llm_structured_output: Setting = Field(
        "auto", validation_alias=AliasChoices("RAGLINE_LLM_STRUCTURED_OUTPUT"))


S = TypeVar("S", bound=BaseSettings)


def load_settings(cls: type[S]) -> S:
    """Build settings or stop with a message that names each bad variable."""
    try:
        return cls()
    except ValidationError as exc:
        prefix = cls.model_config.get("env_prefix", "")
        lines = [f"invalid configuration for {cls.__name__}:"]
        for err in exc.errors():
            name = f"{prefix}{'_'.join(str(p) for p in err['loc'])}".upper()
            lines.append(f"  {name}: {err['msg']} (got {err.get('input')!r})")
        print("\n".join(lines), file=sys.stderr)
        raise SystemExit(2) from None
