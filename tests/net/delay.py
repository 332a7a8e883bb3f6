"""A TCP forwarder that delays what a host sends, run inside the host's namespace:

    python delay.py LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS JITTER_MS

It listens on 127.0.0.1:LISTEN_PORT and forwards every connection to TARGET over the host's
link, holding each chunk the client sends for DELAY ± JITTER ms (uniform; never reordered)
before passing it on; the answers come back at once. What ``tc qdisc add dev eth0 root netem
delay 200ms 50ms`` does on the host's interface, for kernels without netem: the round trip
of every statement grows by the delay. Prints ``ready`` once it listens.
"""

from __future__ import annotations

import asyncio
import random
import sys

CHUNK = 64 * 1024


async def held(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float, jitter: float
) -> None:
    """Copy ``reader`` to ``writer``, each chunk released ``delay`` ± ``jitter`` s after it
    arrived, in order."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def release() -> None:
        while True:
            at, data = await queue.get()
            await asyncio.sleep(max(0.0, at - loop.time()))
            if not data:
                break
            writer.write(data)
            await writer.drain()
        writer.close()

    releasing = asyncio.create_task(release())
    last = 0.0
    try:
        while data := await reader.read(CHUNK):
            last = max(last, loop.time() + random.uniform(delay - jitter, delay + jitter))
            queue.put_nowait((last, data))
    except ConnectionError:
        pass
    queue.put_nowait((last, b""))
    await releasing


async def copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    writer.close()


async def main(port: int, host: str, target: int, delay_ms: float, jitter_ms: float) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(host, target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(
            held(client_r, server_w, delay_ms / 1000, jitter_ms / 1000),
            copy(server_r, client_w),
            return_exceptions=True,
        )

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    port, host, target, delay, jitter = sys.argv[1:6]
    asyncio.run(main(int(port), host, int(target), float(delay), float(jitter)))
