"""A TCP proxy in the test's event loop, to take the database away from a client and give it
back: :meth:`TcpProxy.cut` drops every proxied connection at once and stops listening (a new
connection is refused), :meth:`TcpProxy.restore` listens again on the same port."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

CHUNK = 64 * 1024


class TcpProxy:
    """Forwards connections on 127.0.0.1:<port> to ``target_host``:``target_port``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.port = 0
        """The port it listens on (chosen by the system at :meth:`start`, kept after)."""
        self.accepted = 0
        """Connections accepted so far (over every listening spell)."""
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._upstream: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def listening(self) -> bool:
        return self._server is not None

    @property
    def open_connections(self) -> int:
        """Client connections being forwarded now."""
        return len(self._tasks)

    def upstream_ports(self) -> list[int]:
        """The local ports of the proxy's connections to the server: the ``client_port``
        the server's ``pg_stat_activity`` shows for each proxied connection."""
        return [w.get_extra_info("sockname")[1] for w in self._upstream]

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
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(client_w)
        self.accepted += 1
        upstream_w: asyncio.StreamWriter | None = None
        try:
            upstream_r, upstream_w = await asyncio.open_connection(
                self.target_host, self.target_port
            )
            self._writers.add(upstream_w)
            self._upstream.add(upstream_w)
            await asyncio.gather(_pipe(client_r, upstream_w), _pipe(upstream_r, client_w))
        except OSError:  # the server refused the connection: so does the proxy
            pass
        finally:
            for writer in (client_w, upstream_w):
                if writer is not None:
                    self._writers.discard(writer)
                    self._upstream.discard(writer)
                    _reset(writer)
            self._tasks.discard(task)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of file, then pass the end on (half-close); stop at a reset."""
    with contextlib.suppress(OSError):
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close at once, with a reset rather than an orderly end: nothing buffered is sent."""
    transport = writer.transport
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            # SO_LINGER with a zero timeout: close() sends RST
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
