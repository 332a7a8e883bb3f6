"""Size and depth limits on the JSON values tickwork stores and serves back.

A value is refused where it enters (enqueue, schedules, signals, a task's result, the API):
what is stored must be readable and servable afterwards. Values stored before these limits
existed are still read, shown in part where they are too big or too deep to serve whole.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MAX_JSON_DEPTH = 64
"""Containers (objects and arrays) nested deeper than this are refused; the value itself
counts as the first level (``{"a": [1]}`` is two deep)."""
MAX_JSON_BYTES = 1024 * 1024
"""The largest value accepted as a job's arguments, its result, a schedule's arguments or a
signal's payload: 1 MiB of JSON text."""
LISTING_VALUE_BYTES = 4096
"""In a listing, a job's arguments or result stored larger than this is left out (named in
``omitted``); reading the job itself returns it whole."""


MAX_ERROR_TEXT = 64 * 1024
"""Characters of an attempt's error message, and of its traceback, that are stored; the
rest is cut, saying how long it was."""


def cut(text: str, limit: int = MAX_ERROR_TEXT) -> str:
    """``text``, or its first ``limit`` characters and how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... (cut: {len(text):,} characters in all)"


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``value`` nests mappings and lists deeper than ``limit``. Level by level,
    without recursion (a value too deep for recursion is measured too); a level is scanned
    with comprehensions, so a wide value of a million small containers costs a fraction of
    a second, not seconds."""
    level: list[Any] = [value] if isinstance(value, dict | list | tuple) else []
    depth = 1
    while level:
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            below.extend([c for c in children if isinstance(c, dict | list | tuple)])
        level = below
        depth += 1
    return False


SUSPECT_TEXT = re.compile(r"\\u0000|\\ud[89a-f][0-9a-f]{2}")
"""In ASCII JSON, what may be a NUL or half of a surrogate pair: PostgreSQL stores neither
(a value holding one is walked to be sure; most values hold neither and are not walked)."""


def json_refusal(text: str, value: Any) -> str | None:
    """Why ``value``, encoded as ``text`` (ASCII JSON), may not be stored; None when it may."""
    if len(text) > MAX_JSON_BYTES:
        return f"is {len(text):,} bytes of JSON; at most {MAX_JSON_BYTES:,} are accepted"
    # Depth n needs n opening brackets: most values are ruled out without walking them.
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and too_deep(value):
        return f"is nested deeper than {MAX_JSON_DEPTH} levels"
    if SUSPECT_TEXT.search(text):
        found = unstorable(value, "value")
        if found is not None:
            return f"holds a string that {found[1]} (at {found[0]})"
    return None


def storable(text: str) -> str:
    """``text`` as PostgreSQL can store it, for what is only shown (output, an error's
    message): NUL and unpaired surrogates replaced by U+FFFD."""
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")


def text_problem(text: str) -> str | None:
    """Why PostgreSQL could not store ``text``; None when it can."""
    if "\x00" in text:
        return "must not contain NUL (\\x00) characters"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (no lone surrogates)"
    return None


def unstorable(value: object, where: str) -> tuple[str, str] | None:
    """The first string in ``value`` (nested in mappings, their keys, and lists) PostgreSQL
    could not store, as (where it is, why); None when there is none."""
    if isinstance(value, str):
        reason = text_problem(value)
        return None if reason is None else (where, reason)
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = unstorable(key, f"a key of {where}") or unstorable(item, f"{where}.{key}")
            if found:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = unstorable(item, f"{where}[{index}]")
            if found:
                return found
    return None
