"""What the deployment files may name: every environment variable the code reads (its settings classes, and the
stage a container runs), and a check that a container's environment is valid for its stage's settings."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from gateway.config import ApiKeys, GatewaySettings
from ragline.cli import SERVICE_ENV, SERVICES
from ragline.runtime.config import RuntimeSettings
from services.generator.config import GeneratorSettings
from services.grader.config import GraderSettings
from services.orchestrator.config import OrchestratorSettings
from services.reranker.config import RerankerSettings
from services.retrieval.config import RetrievalSettings
from services.router.config import RouterSettings

STAGE_SETTINGS: dict[str, list[type[BaseSettings]]] = {
    "router": [RouterSettings], "retrieval": [RetrievalSettings], "reranker": [RerankerSettings], "grader": [GraderSettings],
    "generator": [GeneratorSettings], "orchestrator": [OrchestratorSettings], "gateway": [GatewaySettings, ApiKeys],
}


def names(cls: type[BaseSettings]) -> set[str]:
    prefix = cls.model_config.get("env_prefix", "")
    out = set()
    for field, info in cls.model_fields.items():
        alias = info.validation_alias
        out |= {str(a) for a in alias.choices} if isinstance(alias, AliasChoices) else {f"{prefix}{field}".upper()}
    return out


def known_names() -> set[str]:
    """Every variable some process reads."""
    return {SERVICE_ENV} | names(RuntimeSettings) | {n for classes in STAGE_SETTINGS.values() for c in classes for n in names(c)}


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def validate(env: dict[str, str]) -> str:
    """The stage the environment runs (its RAGLINE_SERVICE), after building the shared and the stage's settings from
    exactly this environment; a pydantic ValidationError names any bad value."""
    stage = env.get(SERVICE_ENV, "")
    assert stage in SERVICES, f"{SERVICE_ENV}={stage!r} names no stage"
    with environment(env):
        RuntimeSettings()
        for cls in STAGE_SETTINGS[stage]:
            cls()
    return stage
