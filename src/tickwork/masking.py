"""The one masker of secret values: whatever leaves a run (its result, its error, its live
output) and whatever the process logs while a run holds secrets goes through it.

A secret is found in every form it takes on its way out, not by listing spellings but by
reading the text as decoders would. The text is searched as it is, and in each of its
decodings (up to :data:`DEPTH` chained): percent-decoded (whole or partly encoded, hex in
either case, with ``+`` read as a space and as itself; invalid UTF-8 read as Latin-1) and
backslash-unescaped (JSON's and Python repr's escapes: ``\\"``, ``\\\\``, ``\\uXXXX`` with
surrogate pairs, ``\\xXX`` runs as UTF-8 bytes, ``\\n`` ...; any other escaped character as
itself, as a shell reads ``printf %q``), HTML entities (``&amp;``, ``&#39;``, ``&#x27;``) and a
shell's single quote spliced into a single-quoted word (``'\\''``: bash's ``set -x``).
Each decoding keeps where each of its characters came from, so a secret found in it masks
the encoded span of the original text. The search ignores case (a secret in a URL's host
is lower-cased by the parser).

Each secret is looked for with ``str.find`` (linear whatever its shape; no regular
expression to backtrack) in lower-cased text. The text is searched whole; its
decodings only around the characters of a secret that no encoder changes (letters, digits,
``_.~-``), unless a secret has none or the text encodes one of them (``%41``).

What is not found: a transformed secret (base64, a hash, IDNA's ``xn--`` form of a host, a
script that reverses or splits it), a secret cut across two separately stored texts (beyond
the edges :meth:`Masker.mask` is told of), and encodings that are not decodable (``%`` left
as it is next to encoded characters). docs/security.md lists these.
"""

from __future__ import annotations

import bisect
import contextlib
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MASK",
    "MIN_MASKED",
    "MIN_SECRET",
    "Masker",
    "active",
    "held",
]

MASK = "***"
MIN_MASKED = 4
"""Secret values shorter than this are not masked by value (masking every "ab" in an
output would garble it, and a value that short is no secret); nor is a piece of a secret
shorter than this at a cut edge."""
MIN_SECRET = 8
"""A secret variable is refused at creation when shorter than this (one stored before is
masked from :data:`MIN_MASKED` characters)."""
DEPTH = 3
"""Decodings chained at most: an escaped URL in an error's repr is two (unescape, then
percent-decode); a JSON answer quoted in a repr'd error, three."""

_PERCENT = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_PERCENT_PLUS = re.compile(r"(?:%[0-9A-Fa-f]{2})+|\+")
_BACKSLASH = re.compile(
    r"\\(?:u(?P<u>[0-9A-Fa-f]{4})|U(?P<U>[0-9A-Fa-f]{8})"
    r"|(?P<x>x[0-9A-Fa-f]{2}(?:\\x[0-9A-Fa-f]{2})*)"  # a run of \xXX: bytes read together
    r"|(?P<c>[bfnrt]|[^0-9A-Za-z\r\n]))"  # any other escaped: itself (a shell's \ , \&)
)
_HTML = re.compile(
    r"&(?:#(?P<d>[0-9]{1,7})|#[xX](?P<h>[0-9A-Fa-f]{1,6})|(?P<n>amp|lt|gt|quot|apos));"
)
_HTML_NAMED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}
_SHELL_QUOTE = re.compile(r"'(?:\\'|\"'\")'")
"""A single quote inside a shell's single-quoted word: closed, escaped and reopened (bash's
``set -x``, ``shlex.quote``): ``'\\''`` or ``'"'"'``."""
_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPE_CHARS = frozenset("%\\xuU0123456789abcdefABCDEF\"'/nrt&#;")
"""What a cut through an encoded character may leave of it at a text's edge."""
_ALNUM = re.compile(r"[a-z0-9_.~-]+")
"""What no encoder encodes (URLs' unreserved characters; JSON and repr leave them too)."""
_UNRESERVED_HEX = r"(?:3[0-9]|[46][1-9A-Fa-f]|[57][0-9Aa]|2[DdEe]|5[Ff]|7[Ee])"
_UNRESERVED_DECIMAL = r"0*(?:4[5689]|5[0-7]|6[5-9]|[78][0-9]|9[05789]|1[01][0-9]|12[0-2]|126)"
_ENCODED_UNRESERVED = re.compile(
    rf"%{_UNRESERVED_HEX}|\\(?:u00|x){_UNRESERVED_HEX}"
    rf"|&#(?:[xX]0*{_UNRESERVED_HEX}|{_UNRESERVED_DECIMAL});"
)
"""An encoder that encodes what none needs to (``%41`` for ``A``): a text holding one has its
decodings read whole."""
_WIDTH = 12
"""The most characters one encoding gives a character (a surrogate pair of ``\\uXXXX``):
what a cut at an edge may have split."""
_WIDEST = 32
"""The most characters a character takes through :data:`DEPTH` chained encodings (a 4-byte
character percent-encoded three times: 28): how far from a secret's unencoded characters
its encoded form may reach."""


_UTF8_LEADS = ((2, 0xE0), (3, 0xF0), (4, 0xF5))
"""The bytes a UTF-8 character's first byte says it has, by the first byte's upper bound."""


def _utf8_chars(data: bytes) -> list[tuple[str, int]]:
    """Each character of ``data`` as UTF-8 (a byte that is not, as Latin-1) with its byte
    count."""
    out: list[tuple[str, int]] = []
    i = 0
    while i < len(data):
        lead = data[i]
        size = next((n for n, top in _UTF8_LEADS if 0xC2 <= lead < top), 1)
        if size > 1:
            try:
                out.append((data[i : i + size].decode("utf-8"), size))
                i += size
                continue
            except UnicodeDecodeError:
                pass
        out.append((chr(lead), 1))
        i += 1
    return out


def _folded(text: str) -> str:
    """``text`` lower-cased, each character to one (İ, the one whose lower case is two, to
    i), so positions in it are positions in ``text``."""
    return text.replace("\u0130", "i").lower()


def _percent_decoded(text: str) -> str:
    return _PERCENT.sub(
        lambda m: "".join(c for c, _ in _utf8_chars(bytes.fromhex(m.group().replace("%", "")))),
        text,
    )


Token = tuple[int, int, str]
"""A decoded character: the span of the text it came from, and the character."""


def _percent_tokens(text: str, plus: bool) -> Iterator[Token]:
    for match in (_PERCENT_PLUS if plus else _PERCENT).finditer(text):
        at = match.start()
        if match.group() == "+":
            yield at, at + 1, " "
            continue
        data = bytes.fromhex(match.group().replace("%", ""))
        for char, size in _utf8_chars(data):
            yield at, at + 3 * size, char
            at += 3 * size


def _backslash_tokens(text: str) -> Iterator[Token]:
    high: Token | None = None  # a high surrogate waiting for its low half
    for match in _BACKSLASH.finditer(text):
        start, end = match.span()
        if high is not None and high[1] == start and match.group("u"):
            code = int(match.group("u"), 16)
            if 0xDC00 <= code < 0xE000:
                joined = 0x10000 + ((ord(high[2]) - 0xD800) << 10) + (code - 0xDC00)
                yield high[0], end, chr(joined)
                high = None
                continue
        if high is not None:
            yield high
            high = None
        if match.group("u") or match.group("U"):
            code = int(match.group("u") or match.group("U"), 16)
            char = chr(code) if code < 0x110000 else "\ufffd"
            if 0xD800 <= code < 0xDC00:
                high = (start, end, char)
            else:
                yield start, end, char
        elif match.group("x"):
            data = bytes.fromhex(match.group("x").replace("\\", "").replace("x", ""))
            for char, size in _utf8_chars(data):
                yield start, start + 4 * size, char
                start += 4 * size
        else:
            escaped = match.group("c")
            yield start, end, _SIMPLE.get(escaped, escaped)
    if high is not None:
        yield high


def _html_tokens(text: str) -> Iterator[Token]:
    for match in _HTML.finditer(text):
        if match.group("n"):
            yield match.start(), match.end(), _HTML_NAMED[match.group("n")]
            continue
        code = int(match.group("d"), 10) if match.group("d") else int(match.group("h"), 16)
        char = chr(code) if code < 0x110000 else "\ufffd"
        yield match.start(), match.end(), char


def _html(text: str) -> Iterator[Token]:
    return _html_tokens(text) if "&" in text else iter(())


def _shell_quote(text: str) -> Iterator[Token]:
    if "'\\''" not in text and "'\"'\"'" not in text:
        return iter(())
    return ((m.start(), m.end(), "'") for m in _SHELL_QUOTE.finditer(text))


def _percent(text: str) -> Iterator[Token]:
    return _percent_tokens(text, plus=False) if "%" in text else iter(())


def _percent_plus(text: str) -> Iterator[Token]:
    return _percent_tokens(text, plus=True) if "+" in text else iter(())


def _backslash(text: str) -> Iterator[Token]:
    return _backslash_tokens(text) if "\\" in text else iter(())


DECODERS: tuple[Callable[[str], Iterator[Token]], ...] = (
    _percent,
    _percent_plus,
    _backslash,
    _html,
    _shell_quote,
)
"""Each decoding a text may have, as the characters it changes (one that changes none is
not a decoding of it)."""


@dataclass(frozen=True, slots=True)
class _View:
    """A text as read through decoders, mapping its characters back to the original."""

    text: str
    starts: list[int]
    """Where each decoded character is in this view (ascending)."""
    spans: list[tuple[int, int]]
    """The span of the parent view each decoded character came from."""
    parent: _View | None

    def _position(self, at: int) -> tuple[int, int]:
        k = bisect.bisect_right(self.starts, at) - 1
        if k >= 0 and self.starts[k] == at:
            return self.spans[k]
        base = at if k < 0 else self.spans[k][1] + (at - self.starts[k] - 1)
        return base, base + 1

    def source(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that ``[start, end)`` of this view came from."""
        if self.parent is None:
            return start, end
        first, last = self._position(start)[0], self._position(end - 1)[1]
        return self.parent.source(first, last)


def _decoded(view: _View, tokens: Iterable[Token]) -> _View | None:
    pieces: list[str] = []
    starts: list[int] = []
    spans: list[tuple[int, int]] = []
    done = 0
    size = 0
    for start, end, char in tokens:
        pieces.append(view.text[done:start])
        size += start - done
        starts.append(size)
        spans.append((start, end))
        pieces.append(char)
        size += 1
        done = end
    if not starts:
        return None
    pieces.append(view.text[done:])
    return _View("".join(pieces), starts, spans, view)


def _views(text: str) -> list[_View]:
    """``text`` and each distinct decoding of it, up to :data:`DEPTH` decoders chained."""
    views = [_View(text, [], [], None)]
    seen = {text}
    frontier = views
    for _ in range(DEPTH):
        found = []
        for view in frontier:
            for decoder in DECODERS:
                made = _decoded(view, decoder(view.text))
                if made is not None and made.text not in seen:
                    seen.add(made.text)
                    found.append(made)
        views += found
        frontier = found
    return views


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


class Masker:
    """Masks a set of secret values in text (see the module's documentation for the forms
    found). Immutable; build one per set of secrets."""

    __slots__ = ("_anchors", "_folded", "_longest", "secrets")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = sorted({s for s in secrets if len(s) >= MIN_MASKED}, key=len, reverse=True)
        self.secrets: tuple[str, ...] = tuple(kept)
        """The values masked, longest first."""
        # A secret holding "%XX" may be sent with that left as it is (httpx keeps what is
        # already percent-encoded) and its other characters encoded: that reads as the
        # secret percent-decoded, searched for too.
        decoded = [_percent_decoded(s) for s in kept if _PERCENT.search(s)]
        needles = sorted({*kept, *(d for d in decoded if len(d) >= MIN_MASKED)}, key=len)[::-1]
        self._folded = tuple(dict.fromkeys(_folded(s) for s in needles))
        self._longest = max((len(s) for s in self._folded), default=0)
        # No encoder here encodes an ASCII letter, a digit or "_.~-": an encoded secret shows
        # its longest run of them as it is (in some case), so the decodings are read only
        # around those runs. A secret with none has its decodings read whole.
        anchors = [max(_ALNUM.findall(s), key=len, default="") for s in self._folded]
        self._anchors = tuple(set(anchors)) if kept and all(anchors) else None

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def mask(self, text: str, *, cut: bool = False, cut_before: bool = False) -> str:
        """``text`` with every secret, in any form, replaced by ``***``; ``cut``: the text
        was cut short, so a secret's start at its end is masked too; ``cut_before``: the text
        is the tail of a longer one, so a secret's end at its start is masked too."""
        if not self.secrets or not text:
            return text
        spans = self._spans(text)
        if cut:
            spans += self._end_spans(text)
        if cut_before:
            spans += self._start_spans(text)
        if not spans:
            return text
        out = []
        done = 0
        for start, end in _merged(spans):
            out.append(text[done:start])
            out.append(MASK)
            done = end
        out.append(text[done:])
        return "".join(out)

    def masked(self, value: Any) -> Any:
        """:meth:`mask` through a JSON value's strings (keys and values)."""
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {self.mask(str(k)): self.masked(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.masked(v) for v in value]
        return value

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """Every secret in ``text`` and in its decodings (read whole, or only around where
        a secret's unencoded characters show)."""
        spans = list(self._search(text, [(0, len(text))]))
        for start, end in self._neighbourhoods(text):
            for view in _views(text[start:end])[1:]:
                for found in self._search(view.text, self._regions(view)):
                    first, last = view.source(*found)
                    spans.append((start + first, start + last))
        return spans

    def _neighbourhoods(self, text: str) -> list[tuple[int, int]]:
        """The parts of ``text`` an encoded secret may be in: around each run of a secret's
        unencoded characters (as far as the longest secret encoded at the widest), widened
        to the start of a run of backslashes (which pair from their start)."""
        if self._anchors is None or _ENCODED_UNRESERVED.search(text):
            return [(0, len(text))]
        folded = _folded(text)
        found = []
        for anchor in self._anchors:
            at = folded.find(anchor)
            while at != -1:
                found.append((at, at + len(anchor)))
                at = folded.find(anchor, at + 1)
        reach = _WIDEST * self._longest
        parts: list[tuple[int, int]] = []
        for first, last in sorted(found):
            start = max(first - reach, 0)
            while start > 0 and text[start - 1] == "\\":
                start -= 1
            end = min(last + reach, len(text))
            if parts and start <= parts[-1][1]:
                parts[-1] = (parts[-1][0], end)
            else:
                parts.append((start, end))
        return parts

    def _regions(self, view: _View) -> list[tuple[int, int]]:
        if view.parent is None:
            return [(0, len(view.text))]
        reach = self._longest
        regions: list[tuple[int, int]] = []
        for at in view.starts:
            start, end = max(at - reach + 1, 0), min(at + reach, len(view.text))
            if regions and start <= regions[-1][1]:
                regions[-1] = (regions[-1][0], end)
            else:
                regions.append((start, end))
        return regions

    def _search(self, text: str, regions: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
        """Every occurrence of every secret (overlapping ones too) inside ``regions``."""
        folded = _folded(text)
        for needle in self._folded:  # str.find: linear, whatever the secret's shape
            for start, end in regions:
                at = folded.find(needle, start, end)
                while at != -1:
                    yield at, at + len(needle)
                    at = folded.find(needle, at + 1, end)

    def _window(self) -> int:
        return _WIDEST * self._longest + 16

    def _end_spans(self, text: str) -> list[tuple[int, int]]:
        """A secret's start (at least :data:`MIN_MASKED` characters of it, decoded) at the
        end of ``text``, or before what a cut left of an encoded character there."""
        offset = max(len(text) - self._window(), 0)
        window = text[offset:]
        spans = []
        for keep in _cut_points(window, start=False):
            for view in _views(window[:keep]):
                folded = _folded(view.text)
                for secret in self._folded:
                    at = _begun_at_end(folded, secret)
                    if at is not None:
                        start = view.source(at, len(folded))[0]
                        spans.append((offset + start, len(text)))
        return spans

    def _start_spans(self, text: str) -> list[tuple[int, int]]:
        """A secret's end (at least :data:`MIN_MASKED` characters of it, decoded) at the
        start of ``text``, or after what a cut left of an encoded character there."""
        window = text[: self._window()]
        spans = []
        for skip in _cut_points(window, start=True):
            for view in _views(window[skip:]):
                folded = _folded(view.text)
                for secret in self._folded:
                    end = _ended_at_start(folded, secret)
                    if end is not None:
                        spans.append((0, skip + view.source(0, end)[1]))
        return spans


def _cut_points(text: str, *, start: bool) -> list[int]:
    """Where a secret may begin (``start``) or end in ``text`` when a cut at that edge split
    an encoded character: past any of the escape characters there (at most one encoded
    character's width)."""
    points = [0] if start else [len(text)]
    for n in range(1, min(_WIDTH, len(text)) + 1):
        char = text[n - 1] if start else text[-n]
        if char not in _ESCAPE_CHARS:
            break
        points.append(n if start else len(text) - n)
    return points


_CANDIDATES = 8
"""Edge candidates checked one by one before the linear-time overlap takes over (a periodic
secret in periodic output would otherwise cost the square of its length)."""


def _begun_at_end(text: str, secret: str) -> int | None:
    """Where the longest end of ``text`` that begins ``secret`` starts (at least
    :data:`MIN_MASKED` characters long)."""
    head = secret[:MIN_MASKED]
    at = text.find(head, max(len(text) - len(secret), 0))
    for _ in range(_CANDIDATES):
        if at == -1 or len(text) - at < MIN_MASKED:
            return None
        if secret.startswith(text[at:]):
            return at
        at = text.find(head, at + 1)
    if at == -1:
        return None
    length = _overlap(text[-len(secret) :], secret)
    return len(text) - length if length >= MIN_MASKED else None


def _ended_at_start(text: str, secret: str) -> int | None:
    """Where the longest start of ``text`` that ends ``secret`` ends (at least
    :data:`MIN_MASKED` characters long)."""
    tail = secret[-MIN_MASKED:]
    at = text.rfind(tail, 0, len(secret))
    for _ in range(_CANDIDATES):
        if at == -1:
            return None
        if secret.endswith(text[: at + MIN_MASKED]):
            return at + MIN_MASKED
        at = text.rfind(tail, 0, at + MIN_MASKED - 1)
    if at == -1:
        return None
    length = _overlap(text[: len(secret)][::-1], secret[::-1])
    return length if length >= MIN_MASKED else None


def _overlap(text: str, secret: str) -> int:
    """The length of the longest end of ``text`` that begins ``secret`` (Knuth-Morris-Pratt:
    linear in both)."""
    border = [0] * len(secret)
    k = 0
    for i in range(1, len(secret)):
        while k and secret[i] != secret[k]:
            k = border[k - 1]
        if secret[i] == secret[k]:
            k += 1
        border[i] = k
    k = 0
    for char in text:
        if k == len(secret):
            k = border[k - 1]
        while k and char != secret[k]:
            k = border[k - 1]
        if char == secret[k]:
            k += 1
    return k


class _Held:
    """The secrets the runs of this process hold now, counted (two runs may hold one), and a
    masker of them all, rebuilt when they change. Thread-safe: changes under a lock; readers
    take the current masker, which is immutable."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self.masker = Masker()

    def add(self, secrets: Iterable[str]) -> None:
        with self._lock:
            self._counts.update(secrets)
            self.masker = Masker(self._counts)

    def remove(self, secrets: Iterable[str]) -> None:
        with self._lock:
            self._counts.subtract(secrets)
            self._counts = +self._counts  # drop those no run holds any more
            self.masker = Masker(self._counts)


_HELD = _Held()


@contextlib.contextmanager
def held(masker: Masker) -> Iterator[Masker]:
    """While inside, ``masker``'s secrets are masked in what this process logs too (see
    :func:`active`): a run holds its secrets from when they are read until it ends."""
    secrets = masker.secrets
    if not secrets:
        yield masker
        return
    _HELD.add(secrets)
    try:
        yield masker
    finally:
        _HELD.remove(secrets)


def active() -> Masker:
    """A masker of every secret the runs of this process hold now."""
    return _HELD.masker
