from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from ragline.runtime.config import DEFAULT_PORTS, RuntimeSettings


class RouterSettings(RuntimeSettings):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_ROUTER_", extra="ignore")

    port: int = DEFAULT_PORTS["router"]
