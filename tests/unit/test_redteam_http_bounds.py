"""Red team, round two: how the per-client connection cap counts an address. One IPv6 host
is counted by its /64 (it is handed a whole one), an IPv4-mapped IPv6 address as the IPv4
address it is (a dual-stack socket sees v4 clients that way), a trusted proxy not at all."""

from __future__ import annotations

import pytest

from tickwork.config import ApiSettings
from tickwork.http_bounds import Bounds


def bounds(*trusted: str) -> Bounds:
    return Bounds.of(ApiSettings(trusted_proxies=list(trusted)))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"),  # one /64
        ("::ffff:192.0.2.7", "192.0.2.7"),  # mapped and plain v4
        ("2001:DB8:1:2::1", "2001:db8:1:2::1"),  # spelled in either case
        ("2001:db8:1:2:0:0:0:1", "2001:db8:1:2::1"),  # long and short form
    ],
)
def test_one_client_is_one_key_however_its_address_is_spelled(first: str, second: str) -> None:
    assert bounds().client_key(first) == bounds().client_key(second) is not None


@pytest.mark.parametrize(
    ("first", "second"),
    [("2001:db8:1:2::1", "2001:db8:1:3::1"), ("192.0.2.7", "192.0.2.8"), ("::1", "127.0.0.1")],
)
def test_different_clients_are_different_keys(first: str, second: str) -> None:
    assert bounds().client_key(first) != bounds().client_key(second)


def test_a_trusted_proxy_is_not_capped_in_either_spelling() -> None:
    trusting = bounds("192.0.2.0/24")
    assert trusting.client_key("192.0.2.9") is None
    assert trusting.client_key("::ffff:192.0.2.9") is None
    assert trusting.client_key("198.51.100.1") == "198.51.100.1"


@pytest.mark.parametrize("host", [None, "", "unix:/run/x.sock", "not-an-address", "fe80::1%eth0"])
def test_an_address_that_is_not_ip_is_not_capped_and_does_not_fail(host: str | None) -> None:
    bounds().client_key(host)  # no exception; None or a key
