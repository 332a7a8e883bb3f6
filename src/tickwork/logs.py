"""Structured log output: the message, then the record's extra fields as key=value."""

from __future__ import annotations

import json
import logging
import sys

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class KeyValueFormatter(logging.Formatter):
    """``2026-01-01 12:00:00,000 INFO tickwork.worker attempt finished job_id=1 ...``."""

    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extras = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        if not extras:
            return base
        return base + " " + " ".join(f"{k}={_value(v)}" for k, v in extras.items())


def _value(value: object) -> str:
    """A field's value as written: quoted (JSON string syntax) when it holds spaces, quotes,
    ``=`` or control characters, so a message can neither split into fields nor forge a
    line of its own."""
    text = str(value)
    if text and text.isascii() and text.isprintable() and not any(c in text for c in ' "=\\'):
        return text
    return json.dumps(text)  # ASCII: U+2028 and friends are escaped, not line breaks


def configure(level: str = "INFO") -> None:
    """Send tickwork's logs to stderr with structured fields."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger("tickwork")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
