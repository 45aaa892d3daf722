"""Access groups: who may read a document. A document without groups is the whole tenant's; one with groups is
readable by an API key that shares at least one. Groups come only from the key, never from a request body."""

from __future__ import annotations

import re
from collections.abc import Iterable

GROUP_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
GROUP_RULE = "1-64 letters, digits, '.', '-' or '_'"
MAX_GROUPS = 32
# Stored in place of "no groups", so that one Weaviate filter (contains any of the caller's groups or this) says
# who may read a chunk: Weaviate cannot match an empty array. Not a valid group name, so nobody can claim it.
EVERYONE = "*"


class InvalidGroups(ValueError):
    """Group names a request or a key may not use; the message says why."""


def check_groups(groups: Iterable[str]) -> list[str]:
    """The groups, deduplicated and sorted; InvalidGroups for a bad name or too many."""
    unique = sorted({g.strip() for g in groups if g.strip()})
    bad = [g for g in unique if not GROUP_PATTERN.match(g)]
    if bad:
        raise InvalidGroups(f"bad access group {bad[0]!r}: use {GROUP_RULE}")
    if len(unique) > MAX_GROUPS:
        raise InvalidGroups(f"{len(unique)} access groups; the limit is {MAX_GROUPS}")
    return unique


def split_groups(value: str | list[str]) -> list[str]:
    """Groups as written in a key, a metadata value or a CLI option: 'a|b', 'a,b' or a list."""
    items = value if isinstance(value, list) else re.split(r"[|,]", value)
    return check_groups(str(g) for g in items)


def stored_groups(groups: Iterable[str]) -> list[str]:
    """What a document's chunks store: its groups, or EVERYONE for none."""
    return list(groups) or [EVERYONE]


def readable_by(key_groups: Iterable[str]) -> list[str]:
    """The stored group values a key may read: everyone's documents and its own groups'."""
    return [EVERYONE, *key_groups]
