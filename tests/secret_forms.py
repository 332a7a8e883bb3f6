"""The forms a secret takes on its way out, and a leak check that decodes text with the
standard library alone (not with the masker under test)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import httpx

URL_SAFE = ("", "/", "@", "/:@", "/:@!$&'()*+,;=", "~@#", " ")
"""``safe`` sets of percent-encoders in the wild (quote's default is ``/``; a URL parser
leaves sub-delimiters and ``@`` in a query)."""


def _lower_hex(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)


def forms(secret: str) -> dict[str, str]:
    """Each named spelling of ``secret``, as encoders write it."""
    found = {"as is": secret, "lower": secret.lower(), "upper": secret.upper()}
    for safe in URL_SAFE:
        found[f"quote safe={safe!r}"] = quote(secret, safe=safe)
        if "+" not in safe:  # else "+" means a space and itself: not decodable
            found[f"quote_plus safe={safe!r}"] = quote_plus(secret, safe=safe)
    found["quote, lower-case hex"] = _lower_hex(quote(secret, safe=""))
    found["quote_plus, lower-case hex"] = _lower_hex(quote_plus(secret))
    found["json"] = json.dumps(secret)[1:-1]
    found["json, not ascii"] = json.dumps(secret, ensure_ascii=False)[1:-1]
    found["repr"] = repr(secret)[1:-1]
    found["repr of its bytes"] = repr(secret.encode())[2:-1]
    found["json in json"] = json.dumps(json.dumps(secret))[1:-1]
    found["repr of json"] = repr(json.dumps(secret))[1:-1]
    found["json of a url"] = json.dumps(quote(secret, safe=""))[1:-1]
    found["double percent"] = quote(quote(secret, safe=""), safe="")
    found["every byte percent-encoded"] = "".join(f"%{b:02X}" for b in secret.encode())
    units = secret.encode("utf-16-be")
    found["every character \\u-escaped"] = "".join(
        f"\\u{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2)
    )
    try:  # as httpx writes it in a query and in a URL's user-info
        url = httpx.URL("http://h/echo", params={"p": secret})
        found["httpx query"] = str(url).split("p=", 1)[1]
        raw = httpx.URL(f"http://h/echo?p={secret}")
        found["httpx raw query"] = str(raw).split("p=", 1)[1]
        found["httpx user-info"] = str(httpx.URL("http://h/").copy_with(password=secret))
    except Exception:  # a secret httpx cannot put in a URL is not sent in one
        pass
    return found


_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|([\"\\/'bfnrt]))")
_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(1):
            return chr(int(match.group(1), 16))
        if match.group(2):
            return chr(int(match.group(2), 16))
        return _SIMPLE.get(match.group(3), match.group(3))

    done = _ESCAPE.sub(one, text)
    return done.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _latin1_bytes(text: str) -> str:
    """``\\xc3\\xbc`` read as a str is ``Ã¼``; read as UTF-8 bytes it is ``ü``."""
    try:
        return text.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return text


DECODERS: tuple[Callable[[str], str], ...] = (unquote, unquote_plus, _unescape, _latin1_bytes)


def decodings(text: str, depth: int = 3) -> set[str]:
    """``text`` decoded by every chain of up to ``depth`` decoders."""
    found = {text}
    frontier = [text]
    for _ in range(depth):
        frontier = [d for t in frontier for f in DECODERS if (d := f(t)) not in found]
        found.update(frontier)
    return found


def leaks(text: str, secret: str) -> list[str]:
    """Where ``secret`` (any case) shows in ``text`` or in one of its decodings: the text
    around each sighting."""
    wanted = secret.lower()
    seen = []
    for decoded in decodings(text):
        at = decoded.lower().find(wanted)
        if at >= 0:
            seen.append(decoded[max(at - 40, 0) : at + len(secret) + 40])
    return seen
