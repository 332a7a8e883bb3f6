"""A text search of the job listing: what it looks in, how one page's read is bounded, and
that paging through a bounded search misses no match and shows none twice."""

from __future__ import annotations

from typing import Any

import pytest

from tickwork import App
from tickwork.auth import Role as UserRole
from tickwork.queue import admin

from .api_support import Api, start_api


async def ids(api: Api, query: str) -> list[int]:
    """Every id a search finds, page after page (each page's items newest first)."""
    found: list[int] = []
    cursor: int | None = None
    viewer = api.headers(UserRole.VIEWER)
    for _ in range(100):
        page = await api.client.get(
            f"/api/jobs?{query}" + (f"&before_id={cursor}" if cursor else ""), headers=viewer
        )
        assert page.status_code == 200, page.text
        body = page.json()
        assert body["total"] is None
        found += [j["id"] for j in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            return found
    raise AssertionError("the search never ended")


async def test_a_search_finds_text_in_each_field_any_case_and_wildcards_literally(
    app: App,
) -> None:
    @app.task(queue="found", max_attempts=1)
    def work(**_: Any) -> None:
        raise RuntimeError("the Widget factory broke")

    plain = work.defer(customer="Acme Corp")
    keyed = work.configure(unique_key="order-5_off%").defer()
    work.configure(unique_key="order-5Xoffer").defer()  # what the wildcards would match
    other = work.defer(customer="Umbrella")
    failing = work.defer(n=1)
    async with app.worker(queues=["found"], concurrency=1) as worker:
        while (await worker.run_once()).outcomes:
            pass
    async for api in start_api(app):
        assert await ids(api, "q=acme%20CORP") == [plain.id]
        assert await ids(api, "q=umbrella") == [other.id]
        assert await ids(api, "q=5_off%25") == [keyed.id]  # _ and % are not wildcards
        assert await ids(api, "q=5_off") == [keyed.id]
        assert await ids(api, "q=off%25") == [keyed.id]
        assert await ids(api, f"q=%23{failing.id}") == [failing.id]  # "#5": the id only
        assert failing.id in await ids(api, f"q={failing.id}")  # "5": the id, and any text
        errors = await ids(api, "q=widget%20FACTORY")  # every job failed the same way
        assert len(errors) == 5 and {plain.id, keyed.id, other.id, failing.id} < set(errors)
        assert await ids(api, "q=nowhere") == []
        assert await ids(api, "q=acme&queue=elsewhere") == []
        assert await ids(api, "q=%20%20") == await ids(api, "queue=found")  # blank: no search


async def test_a_bounded_search_pages_through_every_match_once(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page reads at most SEARCH_WINDOW jobs: a page may hold fewer matches (or none)
    and still carry a cursor, and following the cursors finds every match once."""

    @app.task(queue="many")
    def work(**_: Any) -> None:
        pass

    jobs = app.enqueue_many(
        [work.spec(label=("needle" if i % 7 == 0 else "hay") + str(i)) for i in range(60)]
    )
    needles = sorted((j.id for i, j in enumerate(jobs) if i % 7 == 0), reverse=True)
    monkeypatch.setattr(admin, "SEARCH_WINDOW", 5)
    async for api in start_api(app):
        assert await ids(api, "q=needle&limit=2") == needles
        assert await ids(api, "q=needle&limit=50") == needles
        first = (
            await api.client.get(
                "/api/jobs?q=needle&limit=50", headers=api.headers(UserRole.VIEWER)
            )
        ).json()
        assert len(first["items"]) <= 1 and first["next_cursor"] is not None  # 5 read, no more


async def test_bad_searches_are_refused_naming_the_field(app: App) -> None:
    async for api in start_api(app):
        viewer = api.headers(UserRole.VIEWER)
        for query in ("q=" + "x" * 201, "q=a%00b", "q=a%0Ab"):
            answer = await api.client.get(f"/api/jobs?{query}", headers=viewer)
            assert answer.status_code == 400, answer.text
            assert answer.json()["field"] == "q", answer.text
        anonymous = await api.client.get("/api/jobs?q=x")
        assert anonymous.status_code == 401
