"""The HTTP runtime: one call of an HTTP definition, on httpx, through the SSRF guard.

Each hop (the first request and every redirect followed) is checked again: its scheme, and
the address its host resolves to, which is the address connected to. The URL, header values
and body take ``{{ vars.NAME }}`` values; what a run stores (its result, its error) has the
secret values masked in every form (:mod:`tickwork.masking`), and a URL's user-info password
always reads ``***``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import httpx

from tickwork.config import HttpRuntimeSettings
from tickwork.definitions.records import REFERENCE
from tickwork.definitions.templates import Variables
from tickwork.errors import AddressRefused, RunFailed
from tickwork.limits import storable
from tickwork.masking import MASK
from tickwork.runtimes.netguard import IPNetwork, checked_address

REDIRECTS = frozenset({301, 302, 303, 307, 308})
ERROR_BODY_SHOWN = 1024
"""Characters of an unexpected answer's body that its error message keeps."""


def _expected(spec: Mapping[str, Any], status: int) -> bool:
    expected = spec.get("expect_status")
    return 200 <= status < 300 if expected is None else status in expected


async def _read(response: httpx.Response, cap: int) -> tuple[bytes, int, bool]:
    """Up to ``cap`` bytes of the body; how many bytes were read; whether there was more
    (the rest is not read: the connection is closed)."""
    kept = bytearray()
    async for chunk in response.aiter_raw():
        kept += chunk
        if len(kept) > cap:
            return bytes(kept[:cap]), len(kept), True
    return bytes(kept), len(kept), False


CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port)


def shown(url: httpx.URL) -> str:
    """``url`` as a run stores or names it: a password in its user-info reads ``***``
    (whether or not it came from a secret variable)."""
    if url.password:
        url = url.copy_with(username=url.username, password=MASK)
    return str(url)


async def call(
    spec: Mapping[str, Any],
    *,
    exec_timeout: float,
    variables: Variables,
    settings: HttpRuntimeSettings,
    allow: list[IPNetwork],
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """Make the call; its result (status, headers, duration, body); raises RunFailed when
    the status is not expected, the target is refused, or the call fails or times out."""
    method: str = spec["method"]
    try:
        url = httpx.URL(variables.render(spec["url"]))
        origin = _origin(url)
    except Exception as exc:  # httpx.InvalidURL, an IDNA error, a port out of range
        raise RunFailed(variables.mask(f"the URL is not valid: {exc}")) from None
    headers = {k: variables.render(v) for k, v in spec["headers"].items()}
    # what may go on to another origin when a redirect leads there: no credentials, nothing
    # made of a variable (as browsers and httpx drop Authorization)
    portable = {
        k: v
        for k, v in spec["headers"].items()
        if k.lower() not in CREDENTIAL_HEADERS and not REFERENCE.search(v)
    }
    body = None if spec.get("body") is None else variables.render(spec["body"]).encode()
    started = time.monotonic()
    hops: list[httpx.URL] = []
    try:
        async with httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,  # no proxy from the environment: the guard checks what is reached
            timeout=httpx.Timeout(exec_timeout),
            transport=transport,
        ) as client:
            async with asyncio.timeout(exec_timeout):
                for _hop in range(settings.max_redirects + 1):
                    response = await _send(client, method, url, headers, body, allow)
                    try:
                        location = response.headers.get("location")
                        if (
                            spec.get("follow_redirects")
                            and response.status_code in REDIRECTS
                            and location
                        ):
                            hops.append(url)
                            url = url.join(location)
                            if _origin(url) != origin:
                                headers = portable
                            if response.status_code == 303 or (
                                response.status_code in (301, 302) and method == "POST"
                            ):
                                method, body = "GET", None
                            continue
                        content, size, truncated = await _read(
                            response, settings.max_response_bytes
                        )
                    finally:
                        await response.aclose()
                    break
                else:
                    raise RunFailed(f"more than {settings.max_redirects} redirects")
    except TimeoutError:
        raise RunFailed(
            variables.mask(f"{method} {shown(url)} took longer than exec_timeout ({exec_timeout}s)")
        ) from None
    except RunFailed:
        raise
    except Exception as exc:  # httpx's errors, and what a hostile URL or header value raises
        # (an IDNA error, a header value that is not ASCII, a port out of range)
        raise RunFailed(variables.mask(f"{method} {shown(url)} failed: {exc!r}")) from None
    duration = time.monotonic() - started
    text = variables.mask(
        storable(content.decode(response.encoding or "utf-8", errors="replace")), cut=truncated
    )
    result: dict[str, Any] = {
        "status": response.status_code,
        "headers": variables.masked(dict(response.headers)),
        "duration": round(duration, 6),
        "body": text,  # masked above, where it may have been cut
        "body_bytes": size,
        "truncated": truncated,
        "url": variables.mask(shown(url)),
        "redirects": [variables.mask(shown(hop)) for hop in hops],
    }
    if not _expected(spec, response.status_code):
        raise RunFailed(
            f"{method} {result['url']} answered {response.status_code}, not an expected "
            f"status ({spec.get('expect_status') or '2xx'}): {text[:ERROR_BODY_SHOWN]}"
        )
    return result


async def _send(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL,
    headers: dict[str, str],
    body: bytes | None,
    allow: list[IPNetwork],
) -> httpx.Response:
    """One request, to the address the guard checked for the URL's host."""
    if url.scheme not in ("http", "https"):
        raise AddressRefused(shown(url), url.host or "-", f"the scheme {url.scheme!r} is refused")
    if not url.host:
        raise AddressRefused(shown(url), "-", "the URL has no host")
    port = url.port or (443 if url.scheme == "https" else 80)
    address = await checked_address(shown(url), url.host, port, allow)
    host_header = url.netloc.decode("ascii")
    request = client.build_request(
        method,
        url.copy_with(host=address),
        headers={**headers, "Host": host_header},
        content=body,
        extensions={"sni_hostname": url.host} if url.scheme == "https" else {},
    )
    return await client.send(request, stream=True)
