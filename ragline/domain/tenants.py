"""Tenant names: what the gateway accepts in its API keys and what retrieval accepts as a Weaviate tenant."""

from __future__ import annotations

import re

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
TENANT_RULE = "1-64 letters, digits, '-' or '_'"


def is_valid_tenant(name: str) -> bool:
    return bool(TENANT_PATTERN.match(name))
