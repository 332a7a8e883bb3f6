"""How tickwork's connections read JSON: a stored value no reader can decode becomes an
:class:`Undecodable` marker instead of an error, so one such row (written by SQL, or by a
version from before the limits of :mod:`tickwork.limits`) cannot fail a whole page, a
listing or a claim. PostgreSQL stores what Python's reader refuses: JSON nested thousands of
levels deep (the reader recurses; past :data:`DECODE_DEPTH` it is not tried) and numbers of
more digits than Python converts to an int.
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

__all__ = [
    "ADAPTERS",
    "DECODE_DEPTH",
    "JsonLoader",
    "JsonbLoader",
    "Undecodable",
    "json_depth",
    "loads",
    "too_deep_to_decode",
]

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
        """Why the value could not be decoded (``nested deeper than 512 levels ...``)."""
        return self[UNDECODABLE]


DECODE_DEPTH = 512
"""Stored JSON nested deeper than this is not decoded (it is :class:`Undecodable`): Python's
reader recurses once per level, so a value near its recursion limit decodes or not
depending on how deep the reading code already is. Below this every reader decodes it
alike (beyond :data:`~tickwork.limits.MAX_JSON_DEPTH` it is still left out when served)."""

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_DIGITS = re.compile(r"has (\d+) digits")


def json_depth(text: str) -> int:
    """How deep ``text`` (JSON) nests arrays and objects (the value itself is level 1),
    without parsing it (a value too deep to parse is measured too): its brackets outside
    strings, counted at C speed (a megabyte of them in tens of milliseconds)."""
    skeleton = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, skeleton)), default=0)


def too_deep_to_decode(text: str) -> int | None:
    """How deep ``text`` nests when that is deeper than :data:`DECODE_DEPTH`, else None;
    most values hold fewer brackets than that and are not measured."""
    if text.count("[") + text.count("{") <= DECODE_DEPTH:
        return None
    depth = json_depth(text)
    return depth if depth > DECODE_DEPTH else None


def _too_deep(depth: int) -> str:
    return f"nested deeper than {DECODE_DEPTH} levels ({depth:,})"


def reason(text: str, exc: Exception) -> str:
    """Why ``text`` could not be decoded, said in a line (it raised ``exc``)."""
    if isinstance(exc, RecursionError):
        return _too_deep(json_depth(text))
    message = str(exc)
    digits = _DIGITS.search(message)
    if digits is not None and "integer string conversion" in message:
        limit = sys.get_int_max_str_digits()
        return f"holds a number of {int(digits[1]):,} digits (at most {limit:,} are read)"
    return f"is not valid JSON ({type(exc).__name__}: {message[:200]})"


def loads(data: str | bytes) -> Any:
    """``json.loads(data)``, or an :class:`Undecodable` saying why it could not be."""
    try:
        text = data if isinstance(data, str) else data.decode()
        depth = too_deep_to_decode(text)
        return json.loads(text) if depth is None else Undecodable(_too_deep(depth))
    except (RecursionError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError too
        plain = data if isinstance(data, str) else data.decode("utf-8", "replace")
        return Undecodable(reason(plain, exc))


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
