from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline.runtime.config import DEFAULT_PORTS


class RouterSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGLINE_ROUTER_", extra="ignore")

    port: int = DEFAULT_PORTS["router"]
