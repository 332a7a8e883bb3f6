"""What test_security_figures.py attacks with: an API served with auth settings of the test's
choosing, a raw ASGI caller (for what an HTTP client refuses to send), hand-made JWTs, a
capture of every log record, and a corpus of bad inputs aimed at every parameter of every
operation of the API's own OpenAPI document."""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import logging
import random
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from fastapi import FastAPI
from starlette.types import Message

from tickwork import App
from tickwork.api import create_api
from tickwork.auth import AuthService
from tickwork.config import AuthSettings
from tickwork.logs import KeyValueFormatter
from tickwork.signals.runtime import SignalRuntime

from .api_support import BASE_URL

HANG_GUARD = 60.0  # not a timing assertion: only stops a broken test from hanging


# -- an API with auth settings of the test's choosing -------------------------------------


@dataclass
class Served:
    api: FastAPI
    auth: AuthService
    client: httpx.AsyncClient


@asynccontextmanager
async def served(
    app: App,
    *,
    address: str = "127.0.0.1",
    signals: SignalRuntime | None = None,
    **auth_overrides: Any,
) -> AsyncIterator[Served]:
    """The API of ``app`` with ``auth_overrides`` applied to its auth settings (as test_auth's
    ``service()`` does), called over ASGI from client ``address``; no users are made."""
    settings = AuthSettings.model_validate(app.settings.auth.model_dump() | auth_overrides)
    pool = await app.db.async_pool()
    auth = AuthService(pool, app.db.store, settings)
    await auth.start()
    api = create_api(app, auth, pool, signals)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False, client=(address, 40_000))
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        yield Served(api, auth, client)


# -- a raw ASGI call: any bytes in the path, the query and the body ------------------------


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    error: BaseException | None = None
    """What the application raised (after or instead of answering), if anything."""

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


async def asgi_call(
    api: FastAPI,
    method: str,
    raw_path: bytes,
    query: bytes = b"",
    *,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    client: tuple[str, int] = ("192.0.2.66", 40_000),
) -> Answer:
    """One request straight into the ASGI application, as uvicorn would hand it over: the
    path percent-decoded (invalid UTF-8 replaced, as uvicorn does), the query string and
    the body as given. A 500 is what the application answered or, when it raised before
    answering, what the server in front of it would have."""
    from urllib.parse import unquote

    sent_headers = {k.lower(): v for k, v in (headers or {}).items()}
    if body is not None:
        sent_headers.setdefault("content-length", str(len(body)))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote(raw_path.decode("ascii")),
        "raw_path": raw_path,
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"testserver")]
        + [(k.encode("latin-1"), v.encode("latin-1")) for k, v in sent_headers.items()],
        "client": client,
        "server": ("testserver", 80),
    }
    done = asyncio.Event()
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body or b"", "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    status = 0
    answer_headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            for key, value in message.get("headers", []):
                answer_headers[key.decode("latin-1").lower()] = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                done.set()

    error: BaseException | None = None
    try:
        await asyncio.wait_for(api(scope, receive, send), HANG_GUARD)
    except Exception as exc:  # the application raised: a server answers 500 then
        error = exc
    finally:
        done.set()
    return Answer(status or 500, answer_headers, b"".join(chunks), error)


# -- hand-made JWTs ------------------------------------------------------------------------


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def segment(value: dict[str, Any]) -> str:
    return b64url(json.dumps(value, separators=(",", ":")).encode())


def hs_token(header: dict[str, Any], claims: dict[str, Any], key: bytes, digest: Any) -> str:
    """A JWT signed by HMAC with ``digest`` (hashlib.sha256, ...) whatever ``header`` says."""
    signing_input = f"{segment(header)}.{segment(claims)}"
    signature = hmac.new(key, signing_input.encode("ascii"), digest).digest()
    return f"{signing_input}.{b64url(signature)}"


def raw_token(header: dict[str, Any], claims: dict[str, Any], signature: str) -> str:
    """A JWT with any header and claims and ``signature`` as its third part, verbatim."""
    return f"{segment(header)}.{segment(claims)}.{signature}"


# -- every log record ----------------------------------------------------------------------


class Captured(logging.Handler):
    """Keeps every record it sees, formatted as ``tickwork serve`` would print it (message,
    extra fields, traceback), plus the raw arguments."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(KeyValueFormatter("%(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception as exc:  # a record that cannot be formatted is still searched
            text = f"{record.msg!r} {record.args!r} (unformattable: {exc!r})"
        self.lines.append(f"{text} {record.args!r}")


@contextmanager
def every_log_record() -> Iterator[Captured]:
    """Every record of every logger at DEBUG while the block runs (levels, handlers and the
    propagate flags changed for it are put back afterwards)."""
    handler = Captured()
    root = logging.getLogger()
    loggers = [logging.getLogger(name) for name in list(root.manager.loggerDict)]
    saved = [(lg, lg.level, lg.disabled, lg.propagate) for lg in loggers]
    root_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    for lg in loggers:
        lg.setLevel(logging.NOTSET)
        lg.disabled = False
        if not lg.propagate:  # e.g. "tickwork" after logs.configure(): hear it directly
            lg.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(root_level)
        for lg, level, disabled, _propagate in saved:
            lg.setLevel(level)
            lg.disabled = disabled
            if handler in lg.handlers:
                lg.removeHandler(handler)


# -- the bad-input corpus ------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    """One bad value: as raw JSON text (a body field's value) and as the percent-encoded
    text of a path segment or query value (``repeat``: the query parameter given twice)."""

    label: str
    json: bytes
    text: bytes
    repeat: bool = False


def _text(value: str) -> bytes:
    return quote(value, safe="").encode("ascii")


def _string(label: str, value: str) -> Bad:
    return Bad(label, json.dumps(value).encode(), _text(value))


def _scrambled(length: int) -> str:
    """Letters that do not compress (an index entry of them cannot be made small)."""
    chooser = random.Random(20_260_301)
    return "".join(
        chooser.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        for _ in range(length)
    )


THREE_MB = 3 * 1024 * 1024
NESTED_300 = "[" * 300 + "]" * 300
NESTED_5000 = "[" * 5000 + "]" * 5000

CORPUS: tuple[Bad, ...] = (
    Bad("JSON nested 300 deep", NESTED_300.encode(), _text(NESTED_300)),
    Bad("JSON nested 5000 deep", NESTED_5000.encode(), _text(NESTED_5000)),
    Bad("3 MB string", b'"' + b"x" * THREE_MB + b'"', b"x" * THREE_MB),
    Bad("invalid UTF-8", b'"\xff\xfe"', b"%ff%fe"),
    Bad("NUL", b'"a\\u0000b"', b"a%00b"),
    Bad("lone surrogate", b'"\\ud800"', b"%ed%a0%80"),
    _string("SQL: ' OR 1=1 --", "' OR 1=1 --"),
    _string("SQL: '; DROP TABLE jobs; --", "'; DROP TABLE jobs; --"),
    Bad("2**63", b"9223372036854775808", b"9223372036854775808"),
    Bad("-2**63-1", b"-9223372036854775809", b"-9223372036854775809"),
    Bad("1e309", b"1e309", b"1e309"),
    Bad("-1e309", b"-1e309", b"-1e309"),
    Bad("NaN", b"NaN", b"NaN"),
    Bad("-1", b"-1", b"-1"),
    Bad("0", b"0", b"0"),
    Bad("1.5", b"1.5", b"1.5"),
    _string("empty string", ""),
    _string("10,000 characters", _scrambled(10_000)),
    _string("RTL override", "\u202eadmin\u202c.txt"),
    _string("emoji", "\U0001f600\U0001f525\U0001f469\u200d\U0001f4bb"),
    _string("zero-width, BOM, combining", "e\u0301\u200b\ufeff"),
    Bad("object", b'{"a": 1}', _text('{"a": 1}')),
    Bad("array", b"[1, 2]", b"1", repeat=True),
    Bad("null", b"null", b"null"),
    Bad("true", b"true", b"true"),
)
"""Every value is sent in every path, query and top-level body parameter of every operation."""

WHOLE_BODIES: tuple[tuple[str, bytes], ...] = (
    ("JSON nested 300 deep", NESTED_300.encode()),
    ("JSON nested 5000 deep", NESTED_5000.encode()),
    ("3 MB string", b'"' + b"x" * THREE_MB + b'"'),
    ("invalid UTF-8", b'{"a": "\xff\xfe"}'),
    ("invalid UTF-8 key", b'{"\xff\xfe": 1}'),
    ("lone surrogate key", b'{"\\ud800": 1}'),
    ("NUL key", b'{"a\\u0000": 1}'),
    ("1e309", b"1e309"),
    ("NaN", b"NaN"),
    ("null", b"null"),
    ("array", b"[]"),
    ("string", b'"text"'),
    ("empty", b""),
    ("truncated", b'{"a": '),
    ("BOM then JSON", b"\xef\xbb\xbf{}"),
)
"""Sent as the whole body of every operation that takes one."""


# -- the operations of the OpenAPI document ------------------------------------------------


@dataclass(frozen=True)
class Param:
    where: str  # "path", "query" or "body"
    name: str
    schema: dict[str, Any]


@dataclass
class Operation:
    method: str
    path: str
    params: list[Param] = field(default_factory=list)
    takes_body: bool = False
    public: bool = False

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"


def resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with a top-level $ref followed (and the first non-null anyOf branch)."""
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = doc["components"]["schemas"][name]
    if "anyOf" in schema:
        options = [resolve(doc, s) for s in schema["anyOf"] if s.get("type") != "null"]
        if options:
            return options[0]
    return schema


def operations(doc: dict[str, Any]) -> list[Operation]:
    """Every operation of the document, its path and query parameters and its body's
    top-level fields, in a fixed order."""
    found = []
    for path, methods in sorted(doc["paths"].items()):
        for method, spec in sorted(methods.items()):
            op = Operation(method.upper(), path, public=spec.get("security") == [])
            for parameter in spec.get("parameters", []):
                schema = resolve(doc, parameter.get("schema", {}))
                op.params.append(Param(parameter["in"], parameter["name"], schema))
            content = spec.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                op.takes_body = True
                body = resolve(doc, content["application/json"]["schema"])
                for name, schema in body.get("properties", {}).items():
                    op.params.append(Param("body", name, resolve(doc, schema)))
            found.append(op)
    return found


def generic(schema: dict[str, Any]) -> Any:
    """A plausible value of ``schema`` when nothing better is known about the field."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "string":
        if schema.get("format") == "date-time":
            return "2030-01-01T00:00:00Z"
        return "plausible"[: schema.get("maxLength", 9)].ljust(schema.get("minLength", 0), "x")
    if kind == "integer":
        return max(1, int(schema.get("minimum", 1)))
    if kind == "number":
        return 60.0
    if kind == "boolean":
        return False
    if kind == "array":
        return [generic(resolve({}, schema.get("items", {})))]
    if kind == "object":
        return {}
    return 3600  # an untyped value (a setting's)


def encode_path(template: str, values: dict[str, bytes]) -> bytes:
    raw = template
    for name, value in values.items():
        raw = raw.replace("{" + name + "}", value.decode("ascii"))
    return raw.encode("ascii")


def encode_query(values: list[tuple[str, bytes]]) -> bytes:
    return b"&".join(_text(name) + b"=" + value for name, value in values)


def encode_body(values: dict[str, bytes]) -> bytes:
    """A JSON object whose members are the raw JSON texts given."""
    members = [json.dumps(name).encode() + b": " + value for name, value in values.items()]
    return b"{" + b", ".join(members) + b"}"


def as_text(value: Any) -> bytes:
    """A plausible value as path or query text."""
    if isinstance(value, bool):
        return b"true" if value else b"false"
    return _text(str(value))
