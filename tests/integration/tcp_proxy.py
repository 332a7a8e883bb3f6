"""A TCP proxy in the test's event loop, to take the database away from a client and give it
back: :meth:`TcpProxy.cut` drops every proxied connection at once and stops listening (a new
connection is refused), :meth:`TcpProxy.restore` listens again on the same port."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

CHUNK = 64 * 1024


class TcpProxy:
    """Forwards connections on 127.0.0.1:<port> to ``target_host``:``target_port``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.port = 0
        """The port it listens on (chosen by the system at :meth:`start`, kept after)."""
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._upstream: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def upstream_ends(self) -> list[tuple[str, int]]:
        """The local (address, port) of each of the proxy's connections to the server: the
        ``client_addr`` and ``client_port`` the server's ``pg_stat_activity`` shows."""
        return [w.get_extra_info("sockname")[:2] for w in self._upstream]

    async def start(self) -> None:
        """Listen (on a free port the first time, on the same port after a cut)."""
        assert self._server is None, "already listening"
        self._server = await asyncio.start_server(
            self._handle, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        """Stop listening and reset every proxied connection, both the client's and the
        server's side: what a client sees when the network to the database goes away."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()
        for writer in list(self._writers):
            _reset(writer)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._writers.clear()
        self._upstream.clear()

    async def restore(self) -> None:
        """Listen again on the port of before."""
        await self.start()

    async def aclose(self) -> None:
        await self.cut()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        # the forwarding runs in a task of our own, which cut() may cancel (asyncio's
        # callback on the server's own task would log the cancellation as an error)
        self._writers.add(client_w)
        task = asyncio.create_task(self._forward(client_r, client_w))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _forward(
        self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        upstream_w: asyncio.StreamWriter | None = None
        try:
            upstream_r, upstream_w = await asyncio.open_connection(
                self.target_host, self.target_port
            )
            self._writers.add(upstream_w)
            self._upstream.add(upstream_w)
            pipes = {
                asyncio.create_task(_pipe(client_r, upstream_w)),
                asyncio.create_task(_pipe(upstream_r, client_w)),
            }
            try:
                # an end of file is passed on and the other way goes on; a reset ends both
                # (as a real proxy does: a client whose server side was reset must not wait
                # on an open socket for an answer that cannot come)
                while pipes:
                    done, pipes = await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
                    if not all(task.result() for task in done):
                        break
            finally:
                for task in pipes:
                    task.cancel()
                await asyncio.gather(*pipes, return_exceptions=True)
        except OSError:  # the server refused the connection: so does the proxy
            pass
        finally:
            for writer in (client_w, upstream_w):
                if writer is not None:
                    self._writers.discard(writer)
                    self._upstream.discard(writer)
                    _reset(writer)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Copy until end of file and pass the end on (half-close): True; False at a reset."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        return False
    return True


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close at once, with a reset rather than an orderly end: nothing buffered is sent."""
    transport = writer.transport
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            # SO_LINGER with a zero timeout: close() sends RST
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def tcp_target(url: str) -> tuple[str, int] | None:
    """(host, port) the URL reaches over TCP; None for a socket directory, several hosts
    or no host at all (then libpq's default socket)."""
    params = conninfo_to_dict(url)
    host = str(params.get("hostaddr") or params.get("host") or "")
    port = str(params.get("port") or "5432")
    if not host or host.startswith("/") or host.startswith("@") or "," in host or "," in port:
        return None
    return host, int(port)


def through(url: str, port: int) -> str:
    """``url`` with 127.0.0.1:``port`` as its server; the database, user and every other
    parameter (the query string of a URL) are kept."""
    params: dict[str, Any] = {"host": "127.0.0.1", "port": str(port)}
    if conninfo_to_dict(url).get("hostaddr"):
        params["hostaddr"] = "127.0.0.1"
    return make_conninfo(url, **params)


def test_proxied_urls_keep_everything_but_the_server() -> None:
    url = "postgresql://u:pw@db.example:6543/app?sslmode=disable&application_name=x"
    assert tcp_target(url) == ("db.example", 6543)
    assert conninfo_to_dict(through(url, 1234)) == {
        "user": "u",
        "password": "pw",
        "host": "127.0.0.1",
        "port": "1234",
        "dbname": "app",
        "sslmode": "disable",
        "application_name": "x",
    }
    assert tcp_target("postgresql://127.0.0.1/tickwork_dev") == ("127.0.0.1", 5432)
    assert tcp_target("host=10.0.0.1 hostaddr=10.0.0.2 port=7 dbname=d") == ("10.0.0.2", 7)
    assert conninfo_to_dict(through("host=h hostaddr=10.0.0.2 dbname=d", 9)) == {
        "host": "127.0.0.1",
        "hostaddr": "127.0.0.1",
        "port": "9",
        "dbname": "d",
    }
    # the embedded server's form (a socket directory), several hosts, libpq's default socket
    assert tcp_target("postgresql://postgres:@/tickwork?host=/tmp/pg-sock") is None
    assert tcp_target("postgresql://a:5432,b:5432/db") is None
    assert tcp_target("postgresql:///db") is None
