"""What masking a run's output costs: 1 and 50 secrets against 100 kB of plain text, of a JSON
answer (quotes, escaped non-ASCII, percent-encoded links) and of text dense with every kind
of escape (also with one encoded letter, which has every decoding read whole), each secret
placed once, percent-encoded. The best of five runs, in milliseconds
(docs/security.md quotes them).

    .venv/bin/python benchmarks/masking.py
"""

from __future__ import annotations

import json
import platform
import random
import string
import time
from collections.abc import Callable
from urllib.parse import quote

from tickwork.masking import Masker

SIZE = 100_000
ALPHABET = string.ascii_letters + string.digits + " @#%+&=?/:\"'\\ü€"


def plain(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_letters + " \n.,") for _ in range(SIZE))


def json_answer(rng: random.Random) -> str:
    parts: list[str] = []
    while sum(map(len, parts)) < SIZE:
        word = "".join(rng.choice(string.ascii_letters + 'üé€ "') for _ in range(12))
        parts.append(json.dumps({"name": word, "link": "https://e.example/s?q=" + quote(word)}))
    return "[" + ",".join(parts)[:SIZE] + "]"


def dense(rng: random.Random) -> str:
    parts: list[str] = []
    while sum(map(len, parts)) < SIZE:
        word = "".join(rng.choice(string.ascii_letters) for _ in range(8))
        link = "http://x/?a=" + quote(word + " +&") + "+b"
        parts.append(json.dumps({"k": word + ' ü"\\', "u": link}))
    return "".join(parts)[:SIZE]


def measure(masker: Masker, text: str) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        masker.mask(text, cut=True, cut_before=True)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def main() -> None:
    rng = random.Random(37)
    texts: dict[str, Callable[[random.Random], str]] = {
        "plain text": plain,
        "JSON answer": json_answer,
        "dense escapes": dense,
        # an encoded letter: every decoding is read whole (the worst case)
        "dense, %41": lambda rng: "%41" + dense(rng),
    }
    print(f"{platform.machine()}, Python {platform.python_version()}, {SIZE:,} characters")
    for count in (1, 50):
        secrets = [
            "".join(rng.choice(ALPHABET) for _ in range(rng.randint(12, 40))) for _ in range(count)
        ]
        masker = Masker(secrets)
        for name, make in texts.items():
            text = make(rng)
            for secret in secrets[:5]:
                at = rng.randrange(len(text))
                text = text[:at] + quote(secret, safe="") + text[at:]
            out = masker.mask(text)
            assert not any(quote(s, safe="") in out for s in secrets)
            print(f"{count:>3} secrets  {name:<14} {measure(masker, text):7.1f} ms")


if __name__ == "__main__":
    main()
