"""``tickwork serve`` under connection exhaustion (issue 37): one client's idle sockets, every
slot taken, headers and bodies that never complete. A real serve, real sockets; the server's
timeouts are set small, and the tests wait for what the server does, never for a time."""

from __future__ import annotations

import contextlib
import json
import resource
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .support import HANG_GUARD, free_port, serving, wait_for

pytestmark = pytest.mark.e2e

ADMIN = {"email": "root@example.com", "password": "correct horse battery staple"}
ATTACKER = "127.0.0.1"
OTHER_CLIENT = "127.0.0.2"
"""Another client: all of 127/8 is loopback, so a socket bound to it comes from elsewhere."""


def env_of(db_env: dict[str, str], **api: str) -> dict[str, str]:
    env = dict(
        db_env, TICKWORK_ADMIN_EMAIL=ADMIN["email"], TICKWORK_ADMIN_PASSWORD=ADMIN["password"]
    )
    env |= {f"TICKWORK_API__{name.upper()}": value for name, value in api.items()}
    return env


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def open_idle(port: int, source: str, count: int) -> list[socket.socket]:
    """``count`` connections from ``source`` that send nothing."""
    opened = []
    for _ in range(count):
        s = socket.socket()
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        opened.append(s)
    return opened


def at_eof(s: socket.socket) -> bool:
    """The server closed this connection (EOF or reset); False while it is open."""
    ready = select.poll()  # not select(): these tests hold file numbers past 1024
    ready.register(s, select.POLLIN)
    if not ready.poll(0):
        return False
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def closed_by_server(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts as the
    close); the test fails if it stays open past the guard."""
    s.settimeout(HANG_GUARD)
    received = b""
    try:
        while chunk := s.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        raise AssertionError(f"the server kept the connection open; it sent {received!r}") from None
    return received


def client(url: str, source: str) -> httpx.Client:
    return httpx.Client(
        base_url=url,
        timeout=HANG_GUARD,
        transport=httpx.HTTPTransport(local_address=source),
    )


@contextlib.contextmanager
def closing(sockets: list[socket.socket]) -> Iterator[list[socket.socket]]:
    try:
        yield sockets
    finally:
        for s in sockets:
            s.close()


@pytest.fixture
def many_files() -> Iterator[None]:
    """Room for a few thousand sockets in this process and the serve it starts (which
    inherits the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if wanted < 4500:
        pytest.skip(f"the open-file limit ({hard}) leaves no room for 2,100 sockets each side")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_red_teams_2100_idle_sockets_leave_other_clients_served(
    db_env: dict[str, str], tmp_path: Path, clean: None, many_files: None
) -> None:
    """The red team's attack with the default bounds: 2,100 idle sockets from one address
    (past ``api.max_connections``, 2,048) made every request answer 503. Past its cap of 100
    the server closes them at once, and another client is served, probes and API alike."""
    env = env_of(db_env, header_timeout="600")  # the 100 within the cap stay for the check
    with (
        serving(env, tmp_path, "--roles", "api") as (_, url, _printed),
        closing(open_idle(port_of(url), ATTACKER, 2100)) as idle,
    ):
        with client(url, OTHER_CLIENT) as other:
            assert other.get("/healthz").status_code == 200
            assert other.get("/readyz").status_code == 200
            assert other.post("/api/auth/login", json=ADMIN).status_code == 200
        wait_for(lambda: sum(map(at_eof, idle)) == 2000, "2,000 of 2,100 sockets closed")
        assert not any(map(at_eof, idle[:100]))


def test_a_trusted_proxys_connections_are_not_capped_per_client(
    db_env: dict[str, str], tmp_path: Path, clean: None
) -> None:
    """40 connections from a trusted proxy stay open past a per-client cap of 5 (the proxy
    speaks for many clients); an untrusted client's 6th is closed."""
    env = env_of(
        db_env,
        max_connections_per_client="5",
        header_timeout="600",
        trusted_proxies=f'["{ATTACKER}"]',
    )
    with (
        serving(env, tmp_path, "--roles", "api") as (_, url, _printed),
        closing(open_idle(port_of(url), ATTACKER, 40)) as proxied,
        closing(open_idle(port_of(url), OTHER_CLIENT, 6)) as direct,
    ):
        with client(url, "127.0.0.3") as third:
            assert third.get("/healthz").status_code == 200  # after all 46 were seen
        wait_for(lambda: at_eof(direct[5]), "the untrusted client's 6th closed")
        assert not any(map(at_eof, direct[:5]))
        assert not any(map(at_eof, proxied))


def test_probes_answer_when_every_connection_is_taken(
    db_env: dict[str, str], tmp_path: Path, clean: None
) -> None:
    """Four addresses hold all 20 connections: a probe is still answered (the reserved
    share); any other request on a reserved connection answers 503."""
    env = env_of(db_env, max_connections="20", max_connections_per_client="5", header_timeout="600")
    with serving(env, tmp_path, "--roles", "api") as (_, url, _printed):
        port = port_of(url)
        held = [s for n in range(4) for s in open_idle(port, f"127.0.1.{n + 1}", 5)]
        with closing(held):
            with client(url, OTHER_CLIENT) as other:
                assert other.get("/healthz").status_code == 200
                assert other.get("/readyz").status_code == 200
                refused = other.post("/api/auth/login", json=ADMIN)
                assert refused.status_code == 503
                assert refused.headers["content-type"] == "application/problem+json"
                assert refused.headers["retry-after"] == "1"
            assert not any(map(at_eof, held))  # the 20 are served in full: none was dropped


def test_the_probe_port_answers_past_every_bound(
    db_env: dict[str, str], tmp_path: Path, clean: None
) -> None:
    """Twelve addresses fill the API's connections and the reserve (20 + 4): the probe
    port, with connections of its own, answers the probes and nothing else."""
    probe_port = free_port()
    env = env_of(
        db_env,
        max_connections="20",
        probe_reserve="4",
        max_connections_per_client="5",
        header_timeout="600",
        probe_port=str(probe_port),
    )
    with serving(env, tmp_path, "--roles", "api") as (_, url, printed):
        assert f"probes: http://127.0.0.1:{probe_port}/healthz and /readyz" in printed
        port = port_of(url)
        held = [s for n in range(12) for s in open_idle(port, f"127.0.1.{n + 1}", 5)]
        with closing(held):
            wait_for(lambda: sum(map(at_eof, held)) == 60 - 24, "the API's connections full")
            probes = f"http://127.0.0.1:{probe_port}"
            with client(probes, OTHER_CLIENT) as other:
                assert other.get("/healthz").json() == {"status": "ok"}
                assert other.get("/readyz").status_code == 200
                assert other.get("/api/openapi.json").status_code == 404


def test_idle_and_partial_header_connections_are_closed(
    db_env: dict[str, str], tmp_path: Path, clean: None
) -> None:
    """A connection that sends nothing, one that stops inside its headers, and one idle
    after a response: the server closes each (header_timeout, keep_alive_timeout)."""
    env = env_of(db_env, header_timeout="0.5", keep_alive_timeout="0.5")
    with serving(env, tmp_path, "--roles", "api") as (_, url, _printed):
        port = port_of(url)
        with closing(open_idle(port, ATTACKER, 3)) as (silent, partial, kept):
            partial.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert closed_by_server(silent) == b""
            assert closed_by_server(partial) == b""
            answered = closed_by_server(kept)
            assert answered.startswith(b"HTTP/1.1 200 "), answered
            assert b"connection: close" not in answered.lower()  # kept alive, then idle


@pytest.mark.parametrize("path", ["/api/auth/login", "/api/webhooks/1/twh_guess"])
def test_a_trickled_body_is_answered_408_and_closed(
    db_env: dict[str, str], tmp_path: Path, clean: None, path: str
) -> None:
    """A body announced at 60,000 bytes and sent a byte at a time (it never completes
    before the guard): 408 and the connection closed, though bytes keep coming."""
    env = env_of(db_env, body_timeout="1")
    with (
        serving(env, tmp_path, "--roles", "api") as (_, url, _printed),
        closing(open_idle(port_of(url), ATTACKER, 1)) as (s,),
    ):
        s.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 60000\r\n\r\n{".encode()
        )
        sent = 1
        deadline = time.monotonic() + HANG_GUARD
        answer = select.poll()
        answer.register(s, select.POLLIN)
        while not answer.poll(100):  # paces the trickle: a byte each 0.1 s
            assert time.monotonic() < deadline, f"no answer after {sent} bytes"
            try:
                s.sendall(b" ")
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 1
        answered = closed_by_server(s)
        head, _, body = answered.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 "), answered
        assert b"connection: close" in head.lower()
        assert json.loads(body)["status"] == 408


def test_chunk_framing_earns_a_trickled_body_no_time(
    db_env: dict[str, str], tmp_path: Path, clean: None
) -> None:
    """A chunked body whose chunks carry long extensions (framing, kilobytes a second) and a
    byte of data each: only the data earns the body time (body_min_rate), so it is answered
    408 though bytes keep coming fast."""
    env = env_of(db_env, body_timeout="1")
    with (
        serving(env, tmp_path, "--roles", "api") as (_, url, _printed),
        closing(open_idle(port_of(url), ATTACKER, 1)) as (s,),
    ):
        s.sendall(
            b"POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"1;" + b"e" * 600 + b"\r\n \r\n"  # 600 bytes of framing, 1 of data
        chunks = 0
        deadline = time.monotonic() + HANG_GUARD
        answer = select.poll()
        answer.register(s, select.POLLIN)
        while not answer.poll(100):  # paces the trickle: a chunk each 0.1 s (6 kB/s)
            assert time.monotonic() < deadline, f"no answer after {chunks} chunks"
            try:
                s.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            chunks += 1
        answered = closed_by_server(s)
        assert answered.startswith(b"HTTP/1.1 408 "), answered
