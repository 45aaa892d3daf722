from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline.domain.limits import MAX_QUERY_CHARS
from ragline.domain.tenants import TENANT_PATTERN
from ragline.runtime.config import DEFAULT_PORTS, GATEWAY_HTTP_PORT


class GatewaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_GATEWAY_", extra="ignore")

    port: int = DEFAULT_PORTS["gateway"]
    http_port: int = GATEWAY_HTTP_PORT
    max_body_bytes: int = Field(1024 * 1024, ge=1024)
    # Token bucket per API key.
    rate_limit_per_s: float = Field(50.0, gt=0)
    rate_limit_burst: int = Field(100, ge=1)
    max_timeout_ms: int = Field(120_000, ge=100)
    # Ingestion embeds every chunk, so it gets a longer default and limit.
    ingest_timeout_ms: int = Field(300_000, ge=100)
    max_ingest_timeout_ms: int = Field(1_800_000, ge=100)
    max_query_chars: int = Field(MAX_QUERY_CHARS, ge=1)
    max_documents: int = Field(1000, ge=1)
    redis_url: str = "redis://127.0.0.1:6379/0"
    cache_enabled: bool = True


class ApiKeys(BaseSettings):
    """RAGLINE_API_KEYS: comma-separated key:tenant pairs. The tenant always comes from the key."""

    model_config = SettingsConfigDict(env_prefix="RAGLINE_", extra="ignore")

    api_keys: str = Field(..., min_length=1)

    @field_validator("api_keys")
    @classmethod
    def _well_formed(cls, value: str) -> str:
        for pair in value.split(","):
            key, sep, tenant = pair.strip().partition(":")
            if not sep or not key or not TENANT_PATTERN.match(tenant):
                raise ValueError(f"expected key:tenant pairs with tenant names of letters, digits, '-' or '_'; bad pair {pair.strip()!r}")
        return value

    def tenants(self) -> dict[str, str]:
        return dict(pair.strip().split(":", 1) for pair in self.api_keys.split(","))
