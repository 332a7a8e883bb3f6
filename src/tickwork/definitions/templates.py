"""Global variables in definitions: ``{{ vars.NAME }}`` references, their values when a run
starts, and the masking of secret values in whatever a run stores or logs."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus

from psycopg_pool import AsyncConnectionPool

from tickwork.db.store import Store
from tickwork.definitions.records import REFERENCE
from tickwork.errors import RunFailed

MASK = "***"
MIN_MASKED = 4
"""Secret values shorter than this are not masked by value (masking every "a" in an output
would garble it, and a value that short is no secret); docs/definitions.md says so."""


def referenced(texts: Iterable[str | None]) -> set[str]:
    """The variable names referenced in ``texts``."""
    return {m.group(1) for text in texts if text for m in REFERENCE.finditer(text)}


def spellings(secret: str) -> set[str]:
    """The ways a secret's value shows in what a run stores: as it is, percent-encoded (in a
    URL), JSON-escaped (a service echoing it), repr-escaped (an error naming a bad header).
    Each at least :data:`MIN_MASKED` long."""
    forms = {
        secret,
        quote(secret, safe=""),
        quote(secret, safe="/:@!$&'()*+,;="),
        quote_plus(secret),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        repr(secret.encode("utf-8", "replace"))[2:-1],
    }
    return {f for f in forms if len(f) >= MIN_MASKED}


@dataclass(frozen=True, slots=True)
class Variables:
    """The values of the variables a run uses, and a masker of the secret ones."""

    values: dict[str, str]
    secrets: tuple[str, ...] = field(default=())
    forms: tuple[str, ...] = field(init=False, default=())
    """Every spelling of every secret, longest first."""

    def __post_init__(self) -> None:
        found = {form for secret in self.secrets for form in spellings(secret)}
        object.__setattr__(self, "forms", tuple(sorted(found, key=len, reverse=True)))

    def render(self, text: str) -> str:
        """``text`` with each reference replaced by its value."""

        def value(match: re.Match[str]) -> str:
            return self.values[match.group(1)]

        return REFERENCE.sub(value, text)

    def mask(self, text: str, *, cut: bool = False, cut_before: bool = False) -> str:
        """``text`` with every secret value (in any of its :func:`spellings`) replaced by
        ``***``; ``cut``: the text was cut short, so a secret's start at its end is masked
        too; ``cut_before``: the text is the tail of a longer one, so a secret's end at its
        start is masked too."""
        for form in self.forms:
            text = text.replace(form, MASK)
        if cut_before:
            text = self._masked_edge(text, start=True)
        if cut:
            text = self._masked_edge(text, start=False)
        return text

    def _masked_edge(self, text: str, *, start: bool) -> str:
        """``text`` with the longest part of a secret at one edge (its end at the text's
        start, or its start at the text's end) masked."""
        for form in self.forms:
            for length in range(len(form) - 1, MIN_MASKED - 1, -1):
                if start and text.startswith(form[-length:]):
                    return MASK + text[length:]
                if not start and text.endswith(form[:length]):
                    return text[:-length] + MASK
        return text

    def masked(self, value: Any) -> Any:
        """:meth:`mask` through a JSON value's strings (keys and values)."""
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {self.mask(str(k)): self.masked(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.masked(v) for v in value]
        return value


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
