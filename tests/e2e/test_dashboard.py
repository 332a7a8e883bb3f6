"""The dashboard in a real browser (Debian's chromium, driven by Playwright) against a real
``tickwork serve`` on the test database: signing in, live lists, a dead letter read and
retried, a running job cancelled, a queue paused, what each role is shown, an expired
session, and on every page no console error and no accessibility violation (axe-core).
Each page is photographed in both themes (``TICKWORK_SCREENSHOTS``, when set).

Waits are Playwright's own: each ``expect`` waits for the page to show what it asserts (the
lists refresh by themselves), never a fixed sleep."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tickwork import App
from tickwork.auth import AuthService

from .support import browser_missing, serving

pytestmark = pytest.mark.e2e

try:
    import playwright.sync_api as playwright_api
except ImportError:
    browser_missing("playwright is not installed (pip install -e '.[dev]')")

E2E_DIR = Path(__file__).parent
ROOT = E2E_DIR.parents[1]
CHROMIUM = os.environ.get("TICKWORK_CHROMIUM", "/usr/bin/chromium")
AXE = ROOT / "ui" / "node_modules" / "axe-core" / "axe.min.js"
AXE_SOURCE = AXE.read_text() if AXE.exists() else ""
PASSWORD = "correct horse battery staple"
USERS = {"ADMIN": "admin@example.com", "OPERATOR": "ops@example.com", "VIEWER": "view@example.com"}
START_GUARD = 120.0  # not a timing assertion: only stops a broken start from hanging the run
SHOWN = 20_000  # ms Playwright waits for the page to show something (lists refresh every 3 s)

if not Path(CHROMIUM).exists():
    browser_missing(f"no browser at {CHROMIUM} (apt-get install chromium)")
if not AXE.exists():
    browser_missing("axe-core is not installed (npm ci --prefix ui)")
playwright_api.expect.set_options(timeout=SHOWN)


@pytest.fixture
def served(db_env: dict[str, str], app: App, tmp_path: Path) -> Iterator[str]:
    """``tickwork serve`` of dashboard_app on the test schema, with a user per role."""

    async def users() -> None:
        auth = AuthService(await app.db.async_pool(), app.db.store, app.settings.auth)
        await auth.start()
        for role, email in USERS.items():
            await auth.create_user(email, PASSWORD, role)

    app.migrate()
    asyncio.run(users())
    env = db_env | {
        "PYTHONPATH": os.pathsep.join(p for p in (str(E2E_DIR), os.environ.get("PYTHONPATH")) if p),
        "TICKWORK_WORKER__QUEUES": '["ui"]',
        "TICKWORK_RUNTIMES__SERVE": '["bash", "http"]',  # the definitions' page runs both
        "TICKWORK_RUNTIMES__HTTP__ALLOW_NETWORKS": '["127.0.0.1/32"]',  # calls this serve
    }
    with serving(env, tmp_path, "--app", "dashboard_app:app", "--log-level", "ERROR") as started:
        yield started[1]  # its URL


def token(url: str, role: str) -> str:
    answer = httpx.post(f"{url}/api/auth/login", json={"email": USERS[role], "password": PASSWORD})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def enqueue(url: str, task: str, args: dict[str, Any] | None = None) -> int:
    answer = httpx.post(
        f"{url}/api/jobs",
        json={"task": task, "args": args or {}},
        headers=admin_headers(url),
    )
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


class Browser:
    """One browser for the test; a context (cookies, storage) per signed-in user."""

    def __init__(self, url: str, shots: Path | None) -> None:
        self.url = url
        self.shots = shots
        self._manager = playwright_api.sync_playwright()
        self._playwright = self._manager.__enter__()
        self.browser = self._playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        self.errors: list[str] = []

    def page(self, role: str, *, dark: bool = False) -> Any:
        context = self.browser.new_context(
            base_url=self.url,
            viewport={"width": 1280, "height": 860},
            color_scheme="dark" if dark else "light",
        )
        page = context.new_page()
        page.set_default_timeout(SHOWN)
        page.on(
            "console",
            lambda m: self.errors.append(f"{page.url}: {m.text}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: self.errors.append(f"{page.url}: {e}"))
        page.goto("/login")
        page.get_by_label("Email").fill(USERS[role])
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        playwright_api.expect(page.get_by_role("heading", name="Overview")).to_be_visible()
        return page

    def check(self, page: Any, name: str) -> None:
        """In both themes: no accessibility violation (axe-core, WCAG 2 A and AA, contrast
        included) and, when asked, a picture of the whole page."""
        if not page.evaluate("typeof axe !== 'undefined'"):
            page.evaluate(AXE_SOURCE)  # by the driver: the page's policy refuses injected tags
        shown = page.evaluate("document.documentElement.dataset.theme")
        for theme in ("light", "dark"):
            page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
            found = page.evaluate(
                "async () => (await axe.run(document, {runOnly: ['wcag2a', 'wcag2aa']}))"
                ".violations.map(v => v.id + ': ' + v.help + ' (' + v.nodes.length + ')')"
            )
            assert found == [], f"{name} ({theme}): {found}"
            if self.shots is not None:
                page.screenshot(path=str(self.shots / f"{name}-{theme}.png"), full_page=True)
        page.evaluate(f"document.documentElement.dataset.theme = '{shown}'")

    def close(self) -> None:
        self.browser.close()
        self._manager.__exit__(None, None, None)


@pytest.fixture
def browser(served: str) -> Iterator[Browser]:
    shots = os.environ.get("TICKWORK_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
    found = Browser(served, Path(shots) if shots else None)
    try:
        yield found
    finally:
        found.close()


def test_an_operator_works_a_dead_letter_a_running_job_and_a_queue(
    browser: Browser, served: str, tmp_path: Path
) -> None:
    expect = playwright_api.expect
    page = browser.page("OPERATOR")
    browser.check(page, "overview")

    # a job enqueued through the API shows up without a reload
    page.get_by_role("link", name="Jobs").click()
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    first = enqueue(served, "ui.ok", {"word": "hello"})
    expect(page.get_by_role("link", name=f"#{first}")).to_be_visible()
    browser.check(page, "jobs")

    # a text search: the job whose arguments hold the words, not the others
    other = enqueue(served, "ui.ok", {"word": "goodbye"})
    expect(page.get_by_role("link", name=f"#{other}")).to_be_visible()
    page.get_by_label("Search").fill("HELLO")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_role("link", name=f"#{first}")).to_be_visible()
    expect(page.get_by_role("link", name=f"#{other}")).to_have_count(0)
    assert page.get_by_role("button", name="Retry all").count() == 0  # bulk acts on filters
    browser.check(page, "jobs-search")

    # a dead letter: its traceback, a retry, and it succeeds
    dead = enqueue(served, "ui.flaky", {"marker": str(tmp_path / "marker")})
    page.goto(f"/jobs/{dead}")
    expect(page.get_by_role("heading", name=f"Job #{dead} DEAD_LETTER")).to_be_visible()
    expect(page.get_by_label("Traceback")).to_contain_text("the first run fails on purpose")
    browser.check(page, "job-dead-letter")
    page.get_by_role("button", name="Retry").click()
    expect(page.get_by_role("heading", name=f"Job #{dead} SUCCEEDED")).to_be_visible()
    expect(page.get_by_role("list").filter(has_text="job.retried")).to_be_visible()

    # a running job, cancelled
    slow = enqueue(served, "ui.slow")
    page.goto(f"/jobs/{slow}")
    expect(page.get_by_role("heading", name=f"Job #{slow} RUNNING")).to_be_visible()
    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("heading", name=f"Job #{slow} CANCELLED")).to_be_visible()

    # a queue paused and resumed
    page.get_by_role("link", name="Queues").click()
    page.get_by_role("button", name="Pause queue ui").click()
    expect(page.get_by_role("button", name="Resume queue ui")).to_be_visible()
    browser.check(page, "queues")
    page.get_by_role("button", name="Resume queue ui").click()
    expect(page.get_by_role("button", name="Pause queue ui")).to_be_visible()

    # bulk actions name how many jobs they will touch
    page.goto("/jobs?state=SUCCEEDED")
    page.get_by_role("button", name="Retry all").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("jobs match this filter")
    dialog.get_by_role("button", name="Keep as is").click()
    assert browser.errors == [], "\n".join(browser.errors)


def test_a_viewer_is_shown_no_action_and_an_ended_session_goes_back_to_sign_in(
    browser: Browser, served: str, tmp_path: Path
) -> None:
    expect = playwright_api.expect
    dead = enqueue(served, "ui.flaky", {"marker": str(tmp_path / "marker")})
    page = browser.page("VIEWER", dark=True)
    page.goto(f"/jobs/{dead}")
    expect(page.get_by_role("heading", name=f"Job #{dead} DEAD_LETTER")).to_be_visible()
    assert page.get_by_role("button", name="Retry").count() == 0
    assert page.get_by_role("button", name="Cancel").count() == 0
    browser.check(page, "job-dead-letter")
    page.goto("/queues")
    expect(page.get_by_role("link", name="ui")).to_be_visible()
    assert page.get_by_role("button", name="Pause queue ui").count() == 0
    page.goto("/jobs")
    expect(page.get_by_role("link", name=f"#{dead}")).to_be_visible()
    assert page.get_by_role("button", name="Retry all").count() == 0
    browser.check(page, "jobs")
    page.goto("/")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    browser.check(page, "overview")
    # an address that is no page is a 404 (an MCP or OAuth client probing one learns there
    # is nothing there), and a browser is shown the app's own "No such page"
    missing = page.goto("/nowhere")
    assert missing is not None and missing.status == 404
    expect(page.get_by_role("heading", name="No such page")).to_be_visible()
    noted = [e for e in browser.errors if e.startswith(f"{served}/nowhere: ") and "404" in e]
    assert len(noted) == 1, browser.errors  # the browser's note of that 404: the only error
    browser.errors.remove(noted[0])

    # a phone: every page fits its width (wide tables scroll in their own frame)
    page.set_viewport_size({"width": 390, "height": 844})
    for path, heading in (("/", "Overview"), ("/jobs", "Jobs"), (f"/jobs/{dead}", f"Job #{dead}")):
        page.goto(path)
        expect(page.get_by_role("heading", name=heading, exact=False).first).to_be_visible()
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} is {overflow}px wider than a phone"
    browser.check(page, "jobs-phone")
    page.set_viewport_size({"width": 1280, "height": 860})

    # the administrator disables the viewer: the next refresh is refused, back to sign-in
    admin = {"Authorization": f"Bearer {token(served, 'ADMIN')}"}
    users = httpx.get(f"{served}/api/users", headers=admin).json()
    viewer = next(u for u in users if u["email"] == USERS["VIEWER"])
    changed = httpx.patch(
        f"{served}/api/users/{viewer['id']}", json={"disabled": True}, headers=admin
    )
    assert changed.status_code == 200, changed.text
    page.goto("/jobs")
    expect(page.get_by_role("heading", name="Sign in to tickwork")).to_be_visible()
    browser.check(page, "login")
    assert browser.errors == [] or all("401" in e or "403" in e for e in browser.errors)


def test_an_operator_deletes_a_finished_job_after_confirming_and_a_viewer_cannot(
    browser: Browser, served: str
) -> None:
    expect = playwright_api.expect
    done = enqueue(served, "ui.ok", {"word": "bye"})
    kept = enqueue(served, "ui.ok", {"word": "stay"})

    # a viewer sees the finished job and no way to delete it
    viewer = browser.page("VIEWER")
    viewer.goto(f"/jobs/{done}")
    expect(viewer.get_by_role("heading", name=f"Job #{done} SUCCEEDED")).to_be_visible()
    assert viewer.get_by_role("button", name="Delete", exact=True).count() == 0
    browser.check(viewer, "job-viewer")
    viewer.close()  # (a page left on the job would be told it is gone: a 404, as it should)

    # an operator: the dialog first; keeping the job changes nothing
    page = browser.page("OPERATOR")
    page.goto(f"/jobs/{done}")
    expect(page.get_by_role("heading", name=f"Job #{done} SUCCEEDED")).to_be_visible()
    page.get_by_role("button", name="Delete", exact=True).click()
    dialog = page.get_by_role("dialog", name=f"Delete job #{done}?")
    expect(dialog).to_contain_text("the audit trail keeps who deleted it")
    browser.check(page, "job-delete-dialog")
    dialog.get_by_role("button", name="Keep as is").click()
    expect(dialog).to_be_hidden()
    headers = admin_headers(served)
    assert httpx.get(f"{served}/api/jobs/{done}", headers=headers).status_code == 200

    # confirmed: the job is gone and the list is shown, without it
    page.get_by_role("button", name="Delete", exact=True).click()
    dialog.get_by_role("button", name="Delete it").click()
    expect(page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    expect(page).to_have_url(re.compile(r"/jobs$"))
    expect(page.get_by_role("link", name=f"#{kept}")).to_be_visible()
    expect(page.get_by_role("link", name=f"#{done}")).to_have_count(0)
    gone = httpx.get(f"{served}/api/jobs/{done}", headers=headers)
    assert gone.status_code == 404 and USERS["OPERATOR"] in gone.json()["detail"]
    assert browser.errors == [], "\n".join(browser.errors)


def admin_headers(url: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(url, 'ADMIN')}"}


def wait_for_event(lines: Iterator[str], wanted: str, holding: str = "") -> str:
    """The data of the next ``wanted`` event (holding ``holding``) the stream sends."""
    kind = ""
    for line in lines:
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: ") and kind == wanted and holding in line:
            return line[len("data: ") :]
    raise AssertionError(f"the stream ended before a {wanted} event")


def test_the_event_stream_tells_what_changed(served: str) -> None:
    """GET /api/events over a real connection: a job enqueued, then finished, each arrives
    as an event naming its queue or id; no token, no stream."""
    assert httpx.get(f"{served}/api/events").status_code == 401
    headers = {"Authorization": f"Bearer {token(served, 'VIEWER')}"}
    seen: list[tuple[str, str]] = []
    with (
        httpx.Client(base_url=served, timeout=START_GUARD) as client,
        client.stream("GET", "/api/events", headers=headers) as stream,  # asks for gzip
    ):
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert "content-encoding" not in stream.headers  # a stream is never compressed
        lines = stream.iter_lines()
        assert next(lines) == ": tickwork events"  # the listener is starting
        job = enqueue(served, "ui.ok")
        kind = ""
        for line in lines:
            if line.startswith("event: "):
                kind = line[len("event: ") :]
            elif line.startswith("data: "):
                seen.append((kind, line[len("data: ") :]))
                if kind == "finished" and str(job) in line:
                    break
        # a claim notifies no one: the stream says so from its look at the live attempts
        slow = enqueue(served, "ui.slow")
        assert wait_for_event(lines, "running") == "{}"
        cancelled = httpx.post(f"{served}/api/jobs/{slow}/cancel", headers=admin_headers(served))
        assert cancelled.status_code == 200, cancelled.text
        assert str(slow) in wait_for_event(lines, "finished", str(slow))
    assert ("jobs", '{"queues":["ui"]}') in seen or any(k == "resync" for k, _ in seen)
    assert any(k == "finished" and f'"{job}"' in d for k, d in seen)

    # one user holds at most 10 streams: the 11th is refused (the page polls instead)
    readers = []  # each kept: a line reader dropped closes its stream
    with contextlib.ExitStack() as held, httpx.Client(base_url=served, timeout=START_GUARD) as c:
        for _ in range(10):
            stream = held.enter_context(c.stream("GET", "/api/events", headers=headers))
            readers.append(stream.iter_lines())
            assert next(readers[-1]) == ": tickwork events"  # registered
        refused = c.get("/api/events", headers=headers)
        assert refused.status_code == 429 and "10 event streams" in refused.text


def test_the_api_docs_render_under_their_security_policy(browser: Browser, served: str) -> None:
    """Swagger UI at /api/docs, with the dashboard's headers and its one inline script allowed
    by hash: the operations show and the policy refuses nothing (a refusal is a console
    error). HEAD answers the probes, the metrics and the page as a monitor sends it."""
    page = browser.browser.new_page(base_url=served)
    page.on(
        "console", lambda m: browser.errors.append(f"docs: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda e: browser.errors.append(f"docs: {e}"))
    answer = page.goto("/api/docs")
    assert (
        answer is not None and "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    )
    playwright_api.expect(page.locator(".opblock").first).to_be_visible()
    playwright_api.expect(page.get_by_text("/api/jobs", exact=True).first).to_be_visible()
    page.close()
    assert browser.errors == [], "\n".join(browser.errors)
    for path in ("/healthz", "/readyz", "/metrics", "/"):
        head = httpx.head(f"{served}{path}")
        assert head.status_code == 200 and head.content == b"", path


def test_an_administrator_works_every_page(browser: Browser, served: str, app: App) -> None:
    expect = playwright_api.expect
    page = browser.page("ADMIN")
    nav = page.get_by_role("navigation", name="Main")
    for label in ("Schedules", "Workers", "Signals", "Audit", "Users", "Settings"):
        expect(nav.get_by_role("link", name=label)).to_be_visible()

    # a schedule made on the page, run now, then deleted
    nav.get_by_role("link", name="Schedules").click()
    form = page.get_by_role("form", name="New schedule")
    form.get_by_label("Name").fill("nightly-hello")
    form.get_by_label("Task").fill("ui.ok")
    cron = form.get_by_label("Cron (5 fields, or 6 with seconds first)")
    expect(cron).to_have_accessible_description(
        re.compile(r"minute hour day month weekday.*@hourly.*scheduler\.min_interval")
    )
    cron.fill("0 3 * * *")
    form.get_by_label("Time zone").fill("Europe/Paris")
    form.get_by_label("Arguments (JSON)").fill("{nope")
    form.get_by_role("button", name="Create").click()
    expect(form.get_by_role("alert")).to_contain_text("must be a JSON object")
    form.get_by_label("Arguments (JSON)").fill('{"word": "night"}')
    form.get_by_role("button", name="Create").click()
    expect(page.get_by_role("row", name="nightly-hello")).to_be_visible()
    browser.check(page, "schedules")
    page.get_by_role("button", name="Run schedule nightly-hello now").click()
    edit = page.get_by_role("row", name="nightly-hello")
    edit.get_by_text("Edit").click()
    editing = page.get_by_role("form", name="Edit schedule nightly-hello")
    editing.get_by_label("Cron").fill("30 4 * * *")
    editing.get_by_role("button", name="Save").click()
    expect(edit).to_contain_text("30 4 * * *")
    page.get_by_role("button", name="Delete schedule nightly-hello").click()
    expect(page.get_by_role("row", name="nightly-hello")).to_have_count(0)

    # workers with their CPU and memory, signals with their reactors, the audit trail
    nav.get_by_role("link", name="Workers").click()
    expect(page.get_by_role("article").first).to_be_visible()  # the worker and the bash runtime
    browser.check(page, "workers")
    emitted = app.signals.emit("ui.ping", aggregate_key="dashboard").signal_id
    nav.get_by_role("link", name="Signals").click()
    expect(page.get_by_role("heading", name="Reactors")).to_be_visible()
    expect(page.get_by_role("row", name="signal-retention")).to_be_visible()
    browser.check(page, "signals")
    page.get_by_role("link", name=f"#{emitted}").click()
    expect(page.get_by_role("heading", name=re.compile(rf"^Signal #{emitted} "))).to_be_visible()
    browser.check(page, "signal")
    nav.get_by_role("link", name="Audit").click()
    expect(page.get_by_role("cell", name="schedule.deleted")).to_be_visible()
    browser.check(page, "audit")

    # a secret variable is shown as set, never its value
    nav.get_by_role("link", name="Settings").click()
    variable = page.get_by_role("form", name="Set a variable")
    variable.get_by_label("Name").fill("API_KEY")
    variable.get_by_label("Value").fill("s3cr3t-value-never-shown")
    variable.get_by_role("button", name="Set").click()
    expect(page.get_by_role("row", name="API_KEY")).to_contain_text("secret (set)")
    assert "s3cr3t-value-never-shown" not in page.content()
    browser.check(page, "settings")

    # an invite, accepted on its own page by the person invited
    nav.get_by_role("link", name="Users").click()
    invite = page.get_by_role("form", name="New invite")
    invite.get_by_label("Email").fill("new@example.com")
    invite.get_by_label("Role").select_option("OPERATOR")
    invite.get_by_role("button", name="Invite").click()
    link = page.get_by_label("Invite link").inner_text()
    browser.check(page, "users")
    guest = browser.browser.new_context(base_url=served).new_page()
    guest.goto(link.replace(served, ""))
    guest.get_by_label("Your name").fill("New Person")
    guest.get_by_label("Choose a password (12 characters or more)").fill(PASSWORD)
    guest.get_by_role("button", name="Accept and create my account").click()
    expect(guest.get_by_role("status")).to_contain_text("Welcome, new@example.com")
    browser.check(guest, "invite")
    page.reload()
    expect(page.get_by_role("row", name="new@example.com")).to_be_visible()

    # a personal token, shown once
    page.get_by_role("link", name="admin@example.com").click()
    tokens = page.get_by_role("form", name="New API token")
    tokens.get_by_label("Name").fill("laptop")
    tokens.get_by_role("button", name="Create token").click()
    shown = page.get_by_label("New token").inner_text()
    assert shown.startswith("twa_") or len(shown) > 20
    answer = httpx.get(f"{served}/api/me", headers={"Authorization": f"Bearer {shown}"})
    assert answer.status_code == 200 and answer.json()["email"] == USERS["ADMIN"]
    browser.check(page, "account")
    assert browser.errors == [], "\n".join(browser.errors)


def test_an_operator_is_shown_no_administration(browser: Browser) -> None:
    page = browser.page("OPERATOR")
    nav = page.get_by_role("navigation", name="Main")
    playwright_api.expect(nav.get_by_role("link", name="Audit")).to_be_visible()
    assert nav.get_by_role("link", name="Users").count() == 0
    assert nav.get_by_role("link", name="Signals").count() == 0
    page.goto("/settings")
    playwright_api.expect(page.get_by_role("heading", name="Global variables")).to_be_visible()
    assert page.get_by_role("form", name="Set a variable").count() == 0
    page.goto("/schedules")
    playwright_api.expect(page.get_by_role("heading", name="Schedules")).to_be_visible()
    assert page.get_by_role("form", name="New schedule").count() == 0
    assert browser.errors == [], "\n".join(browser.errors)


def test_a_script_written_in_the_editor_runs_with_its_output_shown(
    browser: Browser, served: str, shared_dir: Path
) -> None:
    expect = playwright_api.expect
    page = browser.page("ADMIN")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Definitions").click()
    page.get_by_role("link", name="New definition").click()
    form = page.get_by_role("form", name="New definition")
    form.get_by_label("Name", exact=True).fill("greet")
    editor = form.get_by_role("textbox", name="Script", exact=True)
    expect(editor).to_be_visible()
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.type('echo "hi from the editor"')
    expect(editor).to_have_text('echo "hi from the editor"')
    browser.check(page, "definition-new")
    form.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="greet")).to_be_visible()
    page.get_by_role("button", name="Run now").click()
    expect(page.get_by_label("Output")).to_contain_text("hi from the editor")
    expect(page.get_by_role("heading", name=re.compile(r"^Run #\d+: SUCCEEDED$"))).to_be_visible()
    page.get_by_role("button", name="Make a webhook").click()
    hook = page.get_by_label("Webhook URL").inner_text()
    assert hook.startswith(f"{served}/api/webhooks/")
    answer = httpx.post(hook, json={"event": "push"})
    assert answer.status_code == 202, answer.text
    page.reload()
    expect(page.get_by_text("Attempts per hour, last 24 hours")).to_be_visible()
    browser.check(page, "definition")
    # a new version from the editor, run again
    page.get_by_text("Edit", exact=True).click()
    edit = page.get_by_role("form", name="Edit greet")
    editor = edit.get_by_role("textbox", name="Script", exact=True)
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.type('echo "the second version"')
    edit.get_by_role("button", name="Save a new version").click()
    expect(edit.get_by_role("status")).to_contain_text("version 2")
    page.get_by_role("button", name="Run now").click()
    expect(page.get_by_label("Output")).to_contain_text("the second version")
    # a run's output shows while it runs (the script waits for the test's go)
    editor = edit.get_by_role("textbox", name="Script", exact=True)
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(
        f'echo "working on it"; while [ ! -e {shared_dir}/go ]; do sleep 0.05; done; echo ended'
    )
    edit.get_by_role("button", name="Save a new version").click()
    expect(edit.get_by_role("status")).to_contain_text("version 3")
    page.get_by_role("button", name="Run now").click()
    expect(page.get_by_label("Standard output so far")).to_contain_text("working on it")
    expect(page.get_by_role("heading", name=re.compile(r"^Run #\d+: RUNNING$"))).to_be_visible()
    (shared_dir / "go").touch()
    expect(page.get_by_label("Output", exact=True)).to_contain_text("ended")
    page.get_by_role("link", name="← Definitions").click()
    expect(page.get_by_role("row", name="greet")).to_be_visible()
    browser.check(page, "definitions")
    # deleted after a confirmation
    page.get_by_role("link", name="greet").click()
    page.get_by_role("button", name="Delete").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete it").click()
    expect(page.get_by_role("heading", name="Definitions")).to_be_visible()
    expect(page.get_by_role("row", name="greet")).to_have_count(0)
    assert browser.errors == [], "\n".join(browser.errors)


def test_an_http_call_made_in_the_form_runs_and_its_answer_shows(
    browser: Browser, served: str
) -> None:
    expect = playwright_api.expect
    page = browser.page("ADMIN")
    page.goto("/definitions/new")
    form = page.get_by_role("form", name="New definition")
    form.get_by_label("Name", exact=True).fill("ping-self")
    form.get_by_label("HTTP call").check()
    form.get_by_label("Method").select_option("GET")
    form.get_by_label("URL").fill(f"{served}/jobs")  # a page of the dashboard: 200
    form.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="ping-self")).to_be_visible()
    page.get_by_role("button", name="Run now").click()
    expect(page.get_by_role("heading", name=re.compile(r"^Run #\d+: SUCCEEDED$"))).to_be_visible()
    expect(page.get_by_label("Answer")).to_contain_text('"status": 200')
    # edited in the same fields: a POST that the page refuses (405) fails the run plainly
    page.get_by_text("Edit", exact=True).click()
    edit = page.get_by_role("form", name="Edit ping-self")
    edit.get_by_label("Method").select_option("POST")
    edit.get_by_label("Body (may use {{ vars.NAME }})").fill('{"n": 1}')
    edit.get_by_role("button", name="Save a new version").click()
    expect(edit.get_by_role("status")).to_contain_text("version 2")
    page.get_by_role("button", name="Run now").click()
    expect(page.get_by_role("heading", name=re.compile(r"^Run #\d+: "))).not_to_contain_text(
        "RUNNING"
    )
    browser.check(page, "definition-http")
    assert browser.errors == [], "\n".join(browser.errors)
