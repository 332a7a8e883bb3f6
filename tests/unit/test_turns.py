"""In-process turns per key (the login throttle's first queue)."""

from __future__ import annotations

import asyncio

from tickwork.auth.turns import Turns

HANG_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging


async def test_holders_of_one_key_take_turns_and_other_keys_do_not_wait() -> None:
    turns = Turns()
    inside: set[str] = set()
    entered = {name: asyncio.Event() for name in ("a0", "a1", "a2", "a3", "a4", "b")}
    most = 0
    release = asyncio.Event()

    async def hold(name: str, *keys: str) -> None:
        nonlocal most
        async with turns.take(*keys):
            inside.add(name)
            entered[name].set()
            most = max(most, len([n for n in inside if n.startswith("a")]))
            await release.wait()
            inside.discard(name)

    waiters = [asyncio.create_task(hold(f"a{n}", "account:a", f"address:{n}")) for n in range(5)]
    other = asyncio.create_task(hold("b", "account:b", "address:9"))
    await asyncio.wait_for(entered["a0"].wait(), HANG_GUARD)  # the first of five is in
    await asyncio.wait_for(entered["b"].wait(), HANG_GUARD)  # another account did not wait
    assert inside == {"a0", "b"}  # the other four wait for account a
    release.set()
    await asyncio.wait_for(asyncio.gather(*waiters, other), HANG_GUARD)
    assert most == 1 and all(e.is_set() for e in entered.values())
    assert len(turns) == 0  # nothing kept for keys no one holds


async def test_a_shared_second_key_makes_holders_wait() -> None:
    turns = Turns()
    async with turns.take("account:a", "address:x"):
        waiting = asyncio.create_task(_take(turns, "account:b", "address:x"))
        for _ in range(10):
            await asyncio.sleep(0)
        assert not waiting.done()  # same address: it waits
    await asyncio.wait_for(waiting, HANG_GUARD)
    assert len(turns) == 0


async def _take(turns: Turns, *keys: str) -> None:
    async with turns.take(*keys):
        pass
