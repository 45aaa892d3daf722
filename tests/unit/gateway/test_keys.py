"""API keys name a tenant and, optionally, access groups; a malformed entry stops the gateway with a message."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.config import ApiKeys, Caller


def test_keys_with_and_without_groups():
    keys = ApiKeys(api_keys="k1:acme, k2:acme:hr|finance ,k3:other:eng").callers()
    assert keys == {"k1": Caller("acme"), "k2": Caller("acme", ("finance", "hr")), "k3": Caller("other", ("eng",))}


@pytest.mark.parametrize(("value", "message"), [
    ("k1", "bad entry 'k1'"),
    ("k1:bad tenant", "bad entry 'k1:bad tenant'"),
    ("k1:acme:hr|bad group", "bad access group 'bad group'"),
    ("k1:acme:*", "bad access group '*'"),
])
def test_a_malformed_entry_is_refused_with_its_reason(value, message):
    with pytest.raises(ValidationError, match=message.replace("*", r"\*").replace("|", r"\|")):
        ApiKeys(api_keys=value)


def test_a_grpc_peer_is_named_by_the_address_the_http_side_sees() -> None:
    from gateway.grpc_api import peer_address

    assert peer_address("ipv4:127.0.0.1:53422") == "127.0.0.1"
    assert peer_address("ipv6:[::1]:50060") == "::1"
