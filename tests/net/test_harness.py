"""The harness itself: a host reaches the database over its link, and a fault on the link
really stops its packets."""

from __future__ import annotations

import subprocess
import sys

from .hosts import Fleet


def reach(fleet: Fleet, host, url: str, timeout: int) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    code = f"import psycopg; psycopg.connect({url!r}, connect_timeout={timeout}).close()"
    return subprocess.run(
        host.command(sys.executable, "-c", code), capture_output=True, text=True, timeout=60
    )


def test_a_host_reaches_the_database_until_its_link_is_cut(fleet: Fleet, net_url: str) -> None:
    host = fleet.host()
    assert reach(fleet, host, net_url, 5).returncode == 0
    fleet.network.partition(host)
    dropped = reach(fleet, host, net_url, 1)
    assert dropped.returncode != 0 and "timeout" in dropped.stderr.lower(), dropped.stderr
    fleet.network.heal(host)
    host.cut()
    assert reach(fleet, host, net_url, 1).returncode != 0
    fleet.network.heal(host)
    assert reach(fleet, host, net_url, 5).returncode == 0
