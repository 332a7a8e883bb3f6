"""A program that ends with one of tickwork's pools still open and a connect in flight (to a
server that accepts and never answers): ``asyncio.run`` must return, not wait for ever."""

from __future__ import annotations

import asyncio
import contextlib
import socket

from tickwork import App

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(8)  # accepts (the kernel does) and never answers
port = listener.getsockname()[1]
app = App(database_url=f"postgresql://127.0.0.1:{port}/never", connect_timeout=60)


async def main() -> None:
    with contextlib.suppress(TimeoutError):  # the pool's connect goes on in its own task
        await asyncio.wait_for(app.db.async_pool(), 0.5)


asyncio.run(main())
print("ended")
