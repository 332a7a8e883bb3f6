"""Named SQL statements, loaded from ``sql/*.sql`` blocks that start with ``-- name: <name>``.

Domain code asks for a statement by name; it never assembles SQL. ``{schema}`` in a block is
replaced by the configured schema name (validated as a plain identifier by the settings).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """Split one file into ``{name: statement}``; the leading comments belong to the block."""
    blocks: dict[str, str] = {}
    matches = list(_NAME.finditer(text))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body = text[match.end() : end].strip()
        name = match.group(1)
        if name in blocks:
            raise ValueError(f"SQL statement {name!r} is defined twice")
        blocks[name] = body.rstrip(";").strip()
    return blocks


@cache
def _raw() -> dict[str, str]:
    statements: dict[str, str] = {}
    for entry in sorted(resources.files("tickwork.db").joinpath("sql").iterdir(), key=str):
        if entry.name.endswith(".sql"):
            for name, body in parse(entry.read_text(encoding="utf-8")).items():
                if name in statements:
                    raise ValueError(f"SQL statement {name!r} is defined in two files")
                statements[name] = body
    return statements


def statement_names() -> frozenset[str]:
    """The name of every statement."""
    return frozenset(_raw())


class Statements:
    """The statements of one schema, looked up by name."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self._by_name = {name: body.replace("{schema}", schema) for name, body in _raw().items()}

    def __getitem__(self, name: str) -> str:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no SQL statement named {name!r}") from None

    def channel(self, kind: str) -> str:
        """The NOTIFY channel of this schema for ``kind`` (``jobs`` or ``control``)."""
        return f"{self.schema}.{kind}"
