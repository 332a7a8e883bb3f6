"""How tickwork's connections read JSON: a stored value no reader can decode becomes an
:class:`Undecodable` marker instead of an error, so one such row (written by SQL, or by a
version from before the limits of :mod:`tickwork.limits`) cannot fail a whole page, a
listing or a claim. PostgreSQL stores what Python's reader refuses: JSON nested thousands of
levels deep (the reader recurses) and numbers of more digits than Python converts to an int.
"""

from __future__ import annotations

import json
import re
import sys
from itertools import accumulate
from typing import Any

from psycopg.adapt import AdaptersMap
from psycopg.postgres import adapters as postgres_adapters
from psycopg.types import json as psycopg_json

from tickwork.limits import MAX_JSON_DEPTH

__all__ = ["ADAPTERS", "JsonLoader", "JsonbLoader", "Undecodable", "json_depth", "loads"]

UNDECODABLE = "undecodable"
"""The one key of an :class:`Undecodable` marker."""


class Undecodable(dict[str, str]):
    """Stands for a stored JSON value that could not be decoded: ``{"undecodable": why}``.
    A dict, so code that shows values shows this one too; readers of typed fields
    (:mod:`tickwork.queue.rows`) recognise it and leave the field out."""

    def __init__(self, reason: str) -> None:
        super().__init__({UNDECODABLE: reason})

    @property
    def reason(self) -> str:
        """Why the value could not be decoded (``nested 5,001 levels deep ...``)."""
        return self[UNDECODABLE]


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_DIGITS = re.compile(r"has (\d+) digits")
_BRACKETS = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_depth(text: str) -> int:
    """How deep ``text`` (JSON) nests arrays and objects (the value itself is level 1),
    without parsing it (a value too deep to parse is measured too)."""
    bare = _STRINGS.sub("", text)
    steps = [_BRACKETS[c] for c in bare.encode() if c in _BRACKETS]
    return max(accumulate(steps), default=0)


def reason(text: str | bytes, exc: Exception) -> str:
    """Why ``text`` could not be decoded, said in a line (it raised ``exc``)."""
    if isinstance(exc, RecursionError):
        plain = text if isinstance(text, str) else text.decode("utf-8", "replace")
        depth = json_depth(plain)
        return f"nested {depth:,} levels deep, deeper than the {MAX_JSON_DEPTH} accepted"
    message = str(exc)
    digits = _DIGITS.search(message)
    if digits is not None and "integer string conversion" in message:
        limit = sys.get_int_max_str_digits()
        return f"holds a number of {int(digits[1]):,} digits (at most {limit:,} are read)"
    return f"is not valid JSON ({type(exc).__name__}: {message[:200]})"


def loads(data: str | bytes) -> Any:
    """``json.loads(data)``, or an :class:`Undecodable` saying why it could not be."""
    try:
        return json.loads(data)
    except (RecursionError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError too
        return Undecodable(reason(data, exc))


class JsonLoader(psycopg_json.JsonLoader):
    """``json`` read with :func:`loads`."""

    _loads = staticmethod(loads)


class JsonbLoader(psycopg_json.JsonbLoader):
    """``jsonb`` read with :func:`loads`."""

    _loads = staticmethod(loads)


class _JsonBinaryLoader(psycopg_json.JsonBinaryLoader):
    _loads = staticmethod(loads)


class _JsonbBinaryLoader(psycopg_json.JsonbBinaryLoader):
    _loads = staticmethod(loads)


ADAPTERS = AdaptersMap(postgres_adapters)
"""The adapters of every connection tickwork opens: psycopg's, with :func:`loads` reading
``json`` and ``jsonb`` (a caller's own connection keeps its own)."""
ADAPTERS.register_loader("json", JsonLoader)
ADAPTERS.register_loader("jsonb", JsonbLoader)
ADAPTERS.register_loader("json", _JsonBinaryLoader)
ADAPTERS.register_loader("jsonb", _JsonbBinaryLoader)
