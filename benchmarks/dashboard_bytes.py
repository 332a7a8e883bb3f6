"""What a first visit to the dashboard downloads: chromium (Playwright) opens a running
``tickwork serve``, signs in and reaches the Overview; every file it loaded is then fetched
again with and without ``Accept-Encoding: gzip``, and the bytes on the wire summed::

    python benchmarks/dashboard_bytes.py URL EMAIL PASSWORD

The browser's own cache is empty (a new context), as on a first visit.
"""

from __future__ import annotations

import argparse
from urllib.parse import urlsplit

import httpx
from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"


def loaded(url: str, email: str, password: str) -> list[str]:
    """The same-origin GET URLs the first visit loaded (the API's answers left out)."""
    seen: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_context(base_url=url).new_page()
        page.on(
            "request",
            lambda r: (
                seen.append(r.url)
                if r.method == "GET" and not urlsplit(r.url).path.startswith("/api/")
                else None
            ),
        )
        page.goto("/login")
        page.get_by_label("Email").fill(email)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("heading", name="Overview").wait_for()
        page.wait_for_timeout(3000)  # the Overview's lazy chunks (the page polls: never idle)
        browser.close()
    return sorted(set(seen))


def on_the_wire(urls: list[str], encoding: str) -> dict[str, int]:
    sizes = {}
    with httpx.Client() as client:
        for url in urls:
            request = client.build_request("GET", url, headers={"Accept-Encoding": encoding})
            answer = client.send(request, stream=True)
            sizes[urlsplit(url).path] = sum(len(c) for c in answer.iter_raw())
            answer.close()
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("email")
    parser.add_argument("password")
    args = parser.parse_args()
    urls = loaded(args.url, args.email, args.password)
    plain, packed = on_the_wire(urls, "identity"), on_the_wire(urls, "gzip")
    for path in sorted(plain, key=lambda k: -plain[k]):
        print(f"{path:60} {plain[path] / 1000:8.1f} kB {packed[path] / 1000:8.1f} kB")
    total_plain, total_packed = sum(plain.values()), sum(packed.values())
    print(
        f"{len(urls)} files: {total_plain / 1e6:.2f} MB uncompressed,"
        f" {total_packed / 1e6:.2f} MB gzip"
    )


if __name__ == "__main__":
    main()
