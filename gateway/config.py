from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline.domain.access import GROUP_RULE, InvalidGroups, split_groups
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
    # Requests with a missing or invalid key that one client address may make (a bucket shared like the keys'):
    # past it, 429 instead of 401, so that guessing keys is slow. A valid key from that address is not affected.
    bad_key_rate_per_s: float = Field(5.0, gt=0)
    bad_key_burst: int = Field(50, ge=1)
    max_timeout_ms: int = Field(120_000, ge=100)
    # Ingestion embeds every chunk, so it gets a longer default and limit.
    ingest_timeout_ms: int = Field(300_000, ge=100)
    max_ingest_timeout_ms: int = Field(1_800_000, ge=100)
    max_query_chars: int = Field(MAX_QUERY_CHARS, ge=1)
    max_documents: int = Field(1000, ge=1)
    # Multipart file uploads (POST /v1/documents with files) may be larger than a JSON body.
    max_upload_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    # An upload over this size, or asked with 'Prefer: respond-async', becomes a job (202, GET /v1/jobs/{id}).
    job_threshold_bytes: int = Field(4 * 1024 * 1024, ge=0)
    # How long a finished job's result can be read.
    job_ttl_s: int = Field(24 * 3600, ge=60)
    redis_url: str = "redis://127.0.0.1:6379/0"
    cache_enabled: bool = True


@dataclass(frozen=True)
class Caller:
    """Who a request is from, as its API key says: the tenant and the access groups."""

    tenant: str
    groups: tuple[str, ...] = ()


def _caller(entry: str) -> tuple[str, Caller]:
    key, sep, rest = entry.strip().partition(":")
    tenant, _, groups = rest.partition(":")
    if not sep or not key or not TENANT_PATTERN.match(tenant):
        raise ValueError(f"expected key:tenant or key:tenant:group|group entries, with tenant names of letters, digits, "
                         f"'-' or '_'; bad entry {entry.strip()!r}")
    try:
        return key, Caller(tenant, tuple(split_groups(groups)))
    except InvalidGroups as exc:
        raise ValueError(f"{exc} in entry {entry.strip()!r} (groups: {GROUP_RULE}, separated by '|')") from None


class ApiKeys(BaseSettings):
    """RAGLINE_API_KEYS: comma-separated key:tenant entries, or key:tenant:groupA|groupB to give the key access
    groups. The tenant and the groups always come from the key."""

    model_config = SettingsConfigDict(env_prefix="RAGLINE_", extra="ignore")

    api_keys: str = Field(..., min_length=1)

    @field_validator("api_keys")
    @classmethod
    def _well_formed(cls, value: str) -> str:
        for entry in value.split(","):
            _caller(entry)
        return value

    def callers(self) -> dict[str, Caller]:
        return dict(_caller(entry) for entry in self.api_keys.split(","))
