"""Global variables in definitions: ``{{ vars.NAME }}`` references, their values when a run
starts, and the masking of secret values in whatever a run stores or logs."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tickwork.db.store import Store
from tickwork.definitions.records import REFERENCE
from tickwork.errors import RunFailed
from tickwork.masking import MIN_MASKED, Masker


def referenced(texts: Iterable[str | None]) -> set[str]:
    """The variable names referenced in ``texts``."""
    return {m.group(1) for text in texts if text for m in REFERENCE.finditer(text)}


@dataclass(frozen=True, slots=True)
class Variables:
    """The values of the variables a run uses, and the masker of the secret ones (every
    output of the run goes through it: see :mod:`tickwork.masking`)."""

    values: dict[str, str]
    secrets: tuple[str, ...] = field(default=())
    masker: Masker = field(init=False, default_factory=Masker)

    def __post_init__(self) -> None:
        object.__setattr__(self, "masker", Masker(self.secrets))

    def render(self, text: str) -> str:
        """``text`` with each reference replaced by its value."""

        def value(match: re.Match[str]) -> str:
            return self.values[match.group(1)]

        return REFERENCE.sub(value, text)

    def mask(self, text: str, *, cut: bool = False, cut_before: bool = False) -> str:
        """``text`` with every secret value, in any form, replaced by ``***`` (see
        :meth:`tickwork.masking.Masker.mask`)."""
        return self.masker.mask(text, cut=cut, cut_before=cut_before)

    def masked(self, value: Any) -> Any:
        """:meth:`mask` through a JSON value's strings (keys and values)."""
        return self.masker.masked(value)


async def load(pool: AsyncConnectionPool[Any], store: Store, names: set[str]) -> Variables:
    """The variables named, read when the run starts; a missing one fails the run, named."""
    if not names:
        return Variables({})
    async with pool.connection() as conn:
        rows = await store.variable_values(conn, names=sorted(names))
    found = {r["name"]: r for r in rows}
    missing = sorted(names - found.keys())
    if missing:
        raise RunFailed(f"variable(s) {', '.join(missing)} do not exist")
    secrets = sorted(
        (r["value"] for r in rows if r["secret"] and len(r["value"]) >= MIN_MASKED),
        key=len,
        reverse=True,  # a longer secret holding a shorter one is masked whole
    )
    return Variables({n: r["value"] for n, r in found.items()}, tuple(secrets))
