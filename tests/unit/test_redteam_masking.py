"""Red team, round two: the forms a secret took in a real run's output that the masker did
not read (bash's ``set -x`` trace and ``printf %q`` of a secret holding a quote or a space;
an HTML error page echoing a URL that carried it), each masked now."""

from __future__ import annotations

import html
import json
import shlex
from urllib.parse import quote

import pytest

from tickwork.masking import Masker

SECRET = "it's-a s3cret&<pw>"


def shell_escaped(secret: str) -> str:
    """``printf %q``'s form: each character a shell treats specially after a backslash."""
    return "".join(c if c.isalnum() or c in "-_./" else "\\" + c for c in secret)


FORMS = {
    "bash set -x": "+ curl -u 'admin:it'\\''s-a s3cret&<pw>' https://x",
    "shlex.quote": shlex.quote(SECRET),
    "shell, quote closed by double quotes": "'it'\"'\"'s-a s3cret&<pw>'",
    "printf %q": shell_escaped(SECRET),
    "html.escape": html.escape(SECRET),
    "html, escape without quote": html.escape(SECRET, quote=False),
    "html decimal entities": "".join(f"&#{ord(c)};" for c in SECRET),
    "html hex entities": "".join(f"&#x{ord(c):x};" for c in SECRET),
    "html in json": json.dumps(html.escape(SECRET)),
    "an error page echoing the url": (
        f"<p>The requested URL /api?key={html.escape(quote(SECRET, safe='&'))} was not found"
    ),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_shell_quoted_and_html_escaped_secrets_are_masked(form: str) -> None:
    text = f"before {FORMS[form]} after"
    masked = Masker([SECRET]).mask(text)
    assert "***" in masked, masked
    assert "s3cret" not in masked


def test_text_with_ampersands_and_backslashes_but_no_secret_is_kept() -> None:
    text = "fish &amp; chips \\ a \\q escape, it'\\''s &#65; &lt;tag&gt;"
    assert Masker([SECRET]).mask(text) == text
