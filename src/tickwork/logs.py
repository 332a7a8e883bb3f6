"""Structured log output: the message, then the record's extra fields as key=value; secret
values the process's runs hold masked in every record (:class:`SecretFilter`)."""

from __future__ import annotations

import json
import logging
import sys
import traceback

from tickwork import masking

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


class SecretFilter(logging.Filter):
    """Masks, in each record it passes, the secret values this process's runs hold now
    (:func:`tickwork.masking.held`): its message (with its arguments), its extra fields, the
    text of its exception and stack. It never drops a record. Installed on tickwork's own
    handler and on the loggers that may see a run's values (``tickwork.worker``,
    ``tickwork.runtimes``, ``httpx``); an application with its own logging adds
    :data:`SECRETS` to its handlers to mask every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        masker = masking.active()
        if not masker:
            return True
        record.msg = masker.mask(record.getMessage())
        record.args = None
        for key, value in list(record.__dict__.items()):
            if key in _STANDARD:
                continue
            if isinstance(value, str):
                record.__dict__[key] = masker.mask(value)
            elif not isinstance(value, int | float | bool | None):
                text = str(value)
                if masker.mask(text) != text:
                    record.__dict__[key] = masker.mask(text)
        if record.exc_info and not record.exc_text:
            record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if record.exc_text:
            record.exc_text = masker.mask(record.exc_text)
        if record.stack_info:
            record.stack_info = masker.mask(record.stack_info)
        return True


SECRETS = SecretFilter()
"""The one filter (adding it again to a logger or handler is a no-op)."""
LOGGERS_SEEING_RUNS = ("tickwork.worker", "tickwork.runtimes", "httpx")


def mask_secrets() -> None:
    """Put :data:`SECRETS` on the loggers that may see a run's values, whatever handlers an
    application gives them (the runtimes call this when they are loaded)."""
    for name in LOGGERS_SEEING_RUNS:
        logging.getLogger(name).addFilter(SECRETS)


def configure(level: str = "INFO") -> None:
    """Send tickwork's logs to stderr with structured fields, secrets masked."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.addFilter(SECRETS)
    mask_secrets()
    root = logging.getLogger("tickwork")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
