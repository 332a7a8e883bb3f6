"""The HTTP server's bounds: who counts as one client, and the settings' checks (the
behaviour itself is tested against a real serve in tests/e2e/test_serve_connections.py)."""

from __future__ import annotations

import pytest

from tickwork.config import ApiSettings, load_settings
from tickwork.errors import ConfigError
from tickwork.http_bounds import Bounds


def bounds(**api: object) -> Bounds:
    return Bounds.of(ApiSettings.model_validate(api))


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("::ffff:203.0.113.7", "203.0.113.7"),  # IPv4 on a dual-stack socket: one client
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),  # the same /64
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        (None, None),
        ("not-an-address", None),
    ],
)
def test_a_client_is_its_address_or_its_ipv6_64(host: str | None, key: str | None) -> None:
    assert bounds().client_key(host) == key


def test_a_trusted_proxy_is_not_counted_as_one_client() -> None:
    proxied = bounds(trusted_proxies=["10.0.0.0/8", "2001:db8::1"])
    assert proxied.client_key("10.1.2.3") is None
    assert proxied.client_key("::ffff:10.1.2.3") is None
    assert proxied.client_key("2001:db8::1") is None
    assert proxied.client_key("2001:db8::2") == "2001:db8::/64"
    assert proxied.client_key("11.1.2.3") == "11.1.2.3"


def test_defaults() -> None:
    found = bounds()
    assert (found.header_timeout, found.body_timeout, found.body_min_rate) == (10.0, 20.0, 500)
    assert (found.keep_alive_timeout, found.max_connections, found.per_client) == (5.0, 2048, 100)
    assert found.probe_reserve == 32
    assert ApiSettings().probe_port is None


def test_bad_bounds_are_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"api\.probe_port \(8080\) must differ from api\.port"):
        load_settings(api={"port": 8080, "probe_port": 8080})
    with pytest.raises(ConfigError, match=r"api\.header_timeout \(0\)"):
        load_settings(api={"header_timeout": 0})
    with pytest.raises(ConfigError, match=r"api\.max_connections_per_client \(0\)"):
        load_settings(api={"max_connections_per_client": 0})
    assert load_settings(api={"port": 0, "probe_port": 0}).api.probe_port == 0


def test_closed_connections_are_logged_at_powers_of_ten(caplog: pytest.LogCaptureFixture) -> None:
    """An attack closes thousands: the log says so a few times, with the count."""
    found = bounds()
    with caplog.at_level("WARNING", logger="tickwork.serve"):
        for _ in range(1000):
            found.note_refused("a reason", "203.0.113.7")
    assert [r.getMessage() for r in caplog.records] == [
        f"HTTP connection closed: a reason ({n} so far)" for n in (1, 10, 100, 1000)
    ]
