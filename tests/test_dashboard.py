"""The operator dashboard, driven through a real headless Chromium against a real server.

Each test is one scenario and asserts on what the browser shows (and, for actions, on what the
API then says). Screenshots of every page go to ``$INBOTS_SCREENSHOTS`` (default
``build/screenshots``). SQLite only: the pages run the same services the API tests cover on both
databases.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from sqlalchemy import delete

from inbots.dashboard.pages import STATE_CHIPS
from inbots.db.engine import Database
from inbots.db.uow import unit_of_work
from inbots.deliveries.state import STATES
from inbots.models.workspaces import OperatorToken
from tests.helpers import Api
from tests.receivers import FAST, always, receiver

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SHOTS = Path(os.environ.get("INBOTS_SCREENSHOTS", "build/screenshots"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

# SQLite only: these drive the same services the API tests cover on both databases. One xdist
# worker runs them all: one Chromium, not one per worker.
pytestmark = [pytest.mark.parametrize("backend", ["sqlite"]), pytest.mark.xdist_group("dashboard")]


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return dict(FAST)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """One headless Chromium for the whole module, with a throwaway profile."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        reason = f"headless browser tests need {' and '.join(missing)}"
        if IN_CI:
            pytest.fail(reason + " (CI=true: they must run)")
        pytest.skip(reason)
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not download anything
    profile = tempfile.mkdtemp(prefix="inbots-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1366,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


T = TypeVar("T")


def gone(element: WebElement | None) -> bool:
    """Whether ``element`` left the page. Chromedriver says so as a stale element, or, when the
    page is swapped just as it looks, as an inspector error ("does not belong to the
    document"): ``staleness_of`` took the second for a failure."""
    if element is None:
        return True
    try:
        element.is_enabled()
    except WebDriverException as exc:
        if swapped(exc):
            return True
        raise
    return False


def swapped(exc: WebDriverException) -> bool:
    """Whether chromedriver's error says the page was swapped under the element read: a stale
    element, or an inspector error ("does not belong to the document")."""
    return isinstance(exc, StaleElementReferenceException) or (
        "does not belong to the document" in str(exc)
    )


class Dashboard:
    """The browser pointed at one test's server."""

    def __init__(self, driver: WebDriver, base_url: str) -> None:
        self.driver = driver
        self.base_url = base_url
        self._flash: WebElement | None = None  # the flash read last

    def go(self, path: str) -> None:
        self.driver.get(self.base_url + path)

    def path(self) -> str:
        url: str = self.driver.current_url
        return url.removeprefix(self.base_url)

    def find(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def wait(self, condition: Callable[[], Any], timeout: float = 10, what: str = "") -> Any:
        try:
            # A live refresh may swap <main> between finding an element and reading it: the
            # condition is asked again rather than failing on the stale element.
            return WebDriverWait(
                self.driver,
                timeout,
                poll_frequency=0.1,
                ignored_exceptions=(StaleElementReferenceException,),
            ).until(lambda _d: condition())
        except TimeoutException:
            raise AssertionError(f"timed out waiting for {what or condition}") from None

    def wait_for(self, css: str, timeout: float = 10) -> WebElement:
        def present() -> WebElement | None:
            found = self.find_all(css)
            return found[0] if found else None

        element: WebElement = self.wait(present, timeout, css)
        return element

    def act(self, css: str, action: Callable[[WebElement], Any], tries: int = 3) -> Any:
        """``action`` on the element ``css`` finds, found again if a live refresh replaced it
        first (a stale element was not acted on, so trying again does it once)."""
        return self.read(lambda: action(self.wait_for(css)), tries)

    def read(self, look: Callable[[], T], tries: int = 5) -> T:
        """``look()``, which finds its elements itself and returns plain values, asked again if
        a live refresh swapped the page while it read (a stale element, or chromedriver's
        "does not belong to the document"): what it returns comes from one page."""
        for attempt in range(tries):
            try:
                return look()
            except WebDriverException as exc:
                if not swapped(exc) or attempt == tries - 1:
                    raise
        raise AssertionError("unreachable")

    def sign_in(self, token: str, *, navigate: bool = True) -> None:
        if navigate:
            self.go("/login")
        field = self.wait_for("#token")
        field.clear()
        field.send_keys(token)
        self.find("#sign-in").click()

    def flash(self) -> str:
        """The flash of the page the last click led to. A click does not wait for the page its
        form submits, so the flash read last (of the page before) is waited out first: read at
        once, it could be taken for the new one."""
        if self._flash is not None:
            # Still the same page after 10 s: what it says is for the assertion to judge.
            with contextlib.suppress(TimeoutException):
                WebDriverWait(self.driver, 10).until(lambda _d: gone(self._flash))
        self._flash, text = self.act("#flash", lambda element: (element, element.text))
        return str(text)

    def session_cookie(self) -> dict[str, Any]:
        cookies = {c["name"]: c for c in self.driver.get_cookies()}
        assert "inbots_session" in cookies, cookies
        return cookies["inbots_session"]

    def shot(self, name: str) -> Path:
        """Save the whole page (the window grows to fit it for the picture) and check the PNG."""
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{name}.png"
        size = self.driver.get_window_size()
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(size["width"], min(max(int(height) + 120, 900), 2400))
        try:
            assert self.driver.save_screenshot(str(path))
        finally:
            self.driver.set_window_size(size["width"], size["height"])
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 1000, path
        return path


@pytest.fixture
def dash(browser: WebDriver, api: Api) -> Dashboard:
    """The shared browser, signed out, for this test's server. Cookies ignore the port, so the
    previous test's session cookie is dropped first."""
    page = Dashboard(browser, api.base_url)
    page.go("/login")
    browser.delete_all_cookies()
    return page


@pytest.fixture
def signed_in(dash: Dashboard, api: Api) -> Dashboard:
    dash.sign_in(api.token)
    dash.wait(lambda: dash.path() == "/", what="the overview after sign-in")
    return dash


def wait_state(api: Api, delivery_id: str, state: str, timeout: float = 15) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        receipt = api.delivery(delivery_id)
        if receipt["state"] == state:
            return receipt
        assert time.monotonic() < deadline, f"{delivery_id} stayed {receipt['state']}"
        time.sleep(0.05)


def test_sign_in_with_the_operator_token_and_a_wrong_token_is_refused(
    dash: Dashboard, api: Api
) -> None:
    dash.sign_in("ops_" + "x" * 43)
    assert "not an operator token" in dash.wait_for("#login-error").text
    assert dash.path().startswith("/login")
    dash.shot("login-error")

    dash.sign_in(api.token)
    dash.wait(lambda: dash.path() == "/", what="the overview")
    assert dash.find("main h1").text == "Overview"
    assert dash.find("#sign-out").is_displayed()

    cookie = dash.session_cookie()
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert api.token not in cookie["value"] and api.token[4:] not in cookie["value"]
    assert dash.driver.execute_script("return document.cookie") == ""  # invisible to scripts


def test_unauthenticated_pages_redirect_to_login(dash: Dashboard, api: Api) -> None:
    dash.go("/agents")
    dash.wait(lambda: dash.path().startswith("/login"), what="the sign-in page")
    assert dash.path() == "/login?next=/agents"
    assert dash.find("#token").is_displayed()
    dash.shot("login")

    for path in (
        "/",
        "/agents",
        "/agents/new",
        "/agents/ag_nope",
        "/threads",
        "/threads/new",
        "/threads/th_nope",
        "/deliveries/dlv_nope",
        "/inbox",
        "/inbox/dlv_nope",
    ):
        answer = httpx.get(api.base_url + path, follow_redirects=False)
        assert answer.status_code == 303, path
        assert answer.headers["location"].startswith("/login"), path

    dash.go("/agents")
    dash.wait(lambda: dash.path().startswith("/login"), what="the sign-in page")
    dash.sign_in(api.token, navigate=False)  # and after signing in, back where it started
    dash.wait(lambda: dash.path() == "/agents", what="the agents page")


def test_agents_page_shows_agents_and_webhook_health(signed_in: Dashboard, api: Api) -> None:
    api.agent("builder", "Builds things").ok(
        "PUT", "/me/brief", json={"brief": "Send me <b>build</b> requests."}
    )
    api.ok("POST", "/agents", 201, json={"name": "never-here"})
    with receiver(always(204)) as hook:
        api.ok("POST", "/agents", 201, json={"name": "pusher", "webhook_url": hook.url})
        sender = api.agent("sender")
        thread = sender.open_thread("Ping", ["pusher"])
        delivery_id = sender.send(thread["id"], "ping")["deliveries"][0]["id"]
        wait_state(api, delivery_id, "notified")
    archived = api.agent("retired")
    api.ok("POST", "/agents/retired/archive")
    assert archived.get("/me").status_code == 401

    signed_in.go("/agents")

    def agents() -> dict[str, Any]:
        """Everything read from one page (the list refreshes itself: read again if swapped)."""
        row = signed_in.wait_for('#agents tr[data-agent="builder"]')
        brief = row.find_element(By.CSS_SELECTOR, "details.brief")
        brief.find_element(By.CSS_SELECTOR, "summary").click()
        pusher = signed_in.find('#agents tr[data-agent="pusher"]')
        health = pusher.find_element(By.CSS_SELECTOR, ".hook-health")
        return {
            "builder": row.text,
            "brief": brief.text,
            "never_here_briefs": len(
                signed_in.find_all('#agents tr[data-agent="never-here"] details.brief')
            ),
            "sender_badge": signed_in.find('#agents tr[data-agent="sender"] .badge').text,
            "pusher": pusher.text,
            "health": health.get_attribute("data-health"),
            "health_text": health.text,
            "archived": signed_in.find('#archived tr[data-agent="retired"]').text,
            "retired_listed": len(signed_in.find_all('#agents tr[data-agent="retired"]')),
            "sessions": signed_in.find('#agents tr[data-agent="builder"] .sessions-cell').text,
        }

    seen = signed_in.read(agents)
    assert "Builds things" in seen["builder"]
    assert "polling" in seen["builder"]
    assert "Send me <b>build</b> requests." in seen["brief"]  # shown as text, never as HTML
    assert seen["never_here_briefs"] == 0
    assert seen["sender_badge"] == "active"
    assert hook.url in seen["pusher"]
    assert seen["health"] == "healthy"
    assert "1 ok · 0 failed of last 1" in seen["health_text"]
    assert seen["archived"].count("archived") >= 1
    assert seen["retired_listed"] == 0
    assert "none named" in seen["sessions"]
    signed_in.shot("agents")


def test_agents_page_shows_each_agents_sessions(signed_in: Dashboard, api: Api) -> None:
    worker = api.agent("worker")
    for label in ("laptop", "ci-runner"):
        worker.ok("GET", "/me", headers={"X-Inbots-Session": label, "User-Agent": "harness/2.1"})
    signed_in.go("/agents")
    cell = signed_in.wait_for('#agents tr[data-agent="worker"] .sessions-cell')
    sessions = cell.find_elements(By.CSS_SELECTOR, "li.session")
    assert [s.text.split(" ·")[0] for s in sessions] == ["ci-runner", "laptop"]
    assert all(s.get_attribute("data-active") == "yes" for s in sessions)
    assert "harness/2.1" in cell.text and "active" in cell.text
    signed_in.shot("agents-sessions")


def test_thread_view_shows_each_recipients_receipt(signed_in: Dashboard, api: Api) -> None:
    planner = api.agent("planner")
    alice = api.agent("alice")
    api.agent("bob")
    thread = planner.open_thread("Ship the release", ["alice", "bob"], goal="Tag and publish.")
    sent = planner.send(thread["id"], "Please tag v1.2 and publish it.", summary="Tag v1.2")
    message_id = sent["message"]["id"]
    alice.ok("GET", f"/messages/{message_id}")
    alice_delivery = next(d["id"] for d in sent["deliveries"] if d["recipient"] == "alice")
    alice.ok("POST", "/acks", json={"ids": [alice_delivery], "outcome": "done", "note": "Tagged"})

    signed_in.go(f"/threads/{thread['id']}")
    card_css = f'article[data-message="{message_id}"]'
    signed_in.wait_for(card_css)

    def look() -> dict[str, Any]:
        """What the card shows, read from one page (the page refreshes itself)."""
        card = signed_in.find(card_css)
        seen: dict[str, Any] = {"card": card.text}
        for recipient in ("alice", "bob"):
            row = card.find_element(By.CSS_SELECTOR, f'tr[data-recipient="{recipient}"]')
            seen[recipient] = {
                "badge": row.find_element(By.CSS_SELECTOR, ".badge").text,
                "text": row.text,
                "stamps": {
                    str(c.get_attribute("data-stamp")): "set"
                    in str(c.get_attribute("class")).split()
                    for c in row.find_elements(By.CSS_SELECTOR, "td[data-stamp]")
                },
            }
        fetched = card.find_element(
            By.CSS_SELECTOR, 'tr[data-recipient="alice"] td[data-stamp="fetched"] time'
        )
        seen["fetched"] = (fetched.get_attribute("title"), fetched.text)
        return seen

    seen = signed_in.read(look)
    assert "Tag v1.2" in seen["card"] and "Please tag v1.2" in seen["card"]
    assert seen["alice"]["badge"] == "acknowledged"
    assert seen["bob"]["badge"] == "accepted"
    assert seen["alice"]["stamps"] == {
        "accepted": True,
        "notified": False,
        "delivered": True,
        "fetched": True,
        "working": False,
        "acknowledged": True,
        "failed": False,
        "stalled": False,
    }
    assert seen["bob"]["stamps"] == {
        "accepted": True,
        "notified": False,
        "delivered": False,
        "fetched": False,
        "working": False,
        "acknowledged": False,
        "failed": False,
        "stalled": False,
    }
    title, shown = seen["fetched"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", title)
    assert "ago" in shown or shown == "just now"
    assert "Tagged" in seen["alice"]["text"]
    signed_in.shot("thread")


def test_operator_confirms_a_close_request_in_the_browser(signed_in: Dashboard, api: Api) -> None:
    opener = api.agent("opener")
    api.agent("helper")
    done = opener.open_thread("Finished work", ["helper"])
    opener.send(done["id"], "All done")
    opener.ok("POST", f"/threads/{done['id']}/close-request", 202)
    undecided = opener.open_thread("Not so fast", ["helper"])
    opener.ok("POST", f"/threads/{undecided['id']}/close-request", 202)

    signed_in.go("/threads")
    request = signed_in.wait_for(f'#close-requests li[data-thread="{done["id"]}"]')
    assert "Finished work" in request.text and "opener" in request.text
    signed_in.shot("threads")
    request.find_element(By.CSS_SELECTOR, '[data-action="confirm-close"]').click()
    assert signed_in.flash() == "Thread closed."
    assert api.ok("GET", f"/threads/{done['id']}")["status"] == "closed"
    closed_row = signed_in.wait_for(f'#threads tr[data-thread="{done["id"]}"]')
    assert closed_row.get_attribute("data-status") == "closed"

    signed_in.go(f"/threads/{undecided['id']}")
    signed_in.wait_for('#close-request [data-action="dismiss-close"]').click()
    assert "open again" in signed_in.flash()
    assert api.ok("GET", f"/threads/{undecided['id']}")["status"] == "open"
    assert not signed_in.find_all("#close-request")


# The receiver answers 500 at once; a 3 s timeout is long enough that a loaded machine's slow POST
# is still an answered 500, not a timeout (FAST's 1 s timed one out once in CI).
@pytest.mark.parametrize(
    "settings_overrides", [{**FAST, "webhook_timeout_seconds": 3.0, "publish_lost_seconds": 20}]
)
def test_failed_delivery_is_listed_with_its_attempts_and_can_be_redelivered(
    signed_in: Dashboard, api: Api
) -> None:
    with receiver(always(500, b"receiver exploded")) as hook:
        api.ok("POST", "/agents", 201, json={"name": "broken", "webhook_url": hook.url})
        sender = api.agent("sender")
        thread = sender.open_thread("Will fail", ["broken"])
        delivery_id = sender.send(thread["id"], "wake up")["deliveries"][0]["id"]
        failed = wait_state(api, delivery_id, "failed")
        assert failed["publish_count"] == 1

        signed_in.go("/")
        card = f'#failed article[data-delivery="{delivery_id}"]'

        def overview() -> tuple[str, list[str], str]:
            item = signed_in.wait_for(card)
            attempts = item.find_elements(By.CSS_SELECTOR, "tr.attempt")
            failed_count = signed_in.find("#stat-failed .value").text
            return item.text, [a.text for a in attempts], failed_count

        text, attempts, failed_count = signed_in.read(overview)
        assert "broken" in text and "Will fail" in text
        assert len(attempts) == 4
        assert all("500" in a and "http_500" in a and "ms" in a for a in attempts)
        assert failed_count == "1"
        signed_in.shot("overview")

        # The overview refreshes itself: the button is found again if it was swapped.
        signed_in.act(f'{card} [data-action="redeliver"]', lambda button: button.click())
        assert delivery_id in signed_in.flash()
        assert api.delivery(delivery_id)["publish_count"] == 2
        hook.wait_for(5)  # the redelivery really went out

        signed_in.go(f"/deliveries/{delivery_id}")
        signed_in.wait(
            lambda: len(signed_in.find_all("tr.attempt")) >= 5, what="the redelivery's attempt"
        )
        assert "failed" in signed_in.find("main h1").text
        signed_in.shot("delivery")


@pytest.mark.parametrize(
    "settings_overrides", [{**FAST, "stall_seconds": 0.5, "renotify_interval_seconds": 0.2}]
)
def test_stalled_delivery_appears_in_the_ops_view_by_itself(signed_in: Dashboard, api: Api) -> None:
    """A recipient that never looks at its mail: the sweep stamps the delivery stalled, and the
    open overview shows it without a reload."""
    signed_in.go("/")
    signed_in.wait_for("#stalled")
    signed_in.driver.execute_script("window.__sameDocument = 'yes';")
    api.agent("sleepy")
    sender = api.agent("sender")
    thread = sender.open_thread("Nobody reads this", ["sleepy"])
    delivery_id = sender.send(thread["id"], "are you there?")["deliveries"][0]["id"]
    wait_state(api, delivery_id, "stalled")

    item = signed_in.wait_for(f'#stalled article[data-delivery="{delivery_id}"]', timeout=12)
    assert item.get_attribute("data-state") == "stalled"
    assert "sleepy" in item.text and "Nobody reads this" in item.text
    assert signed_in.find("#stat-stalled .value").text == "1"
    assert signed_in.driver.execute_script("return window.__sameDocument") == "yes"
    signed_in.shot("overview-stalled")


def test_thread_page_updates_without_reload(signed_in: Dashboard, api: Api) -> None:
    writer = api.agent("writer")
    api.agent("reader")
    thread = writer.open_thread("Live", ["reader"])
    writer.send(thread["id"], "first")
    signed_in.go(f"/threads/{thread['id']}")
    signed_in.wait_for("article.message")
    signed_in.driver.execute_script("window.__sameDocument = 'yes';")

    fresh = f"arrived while watching {uuid.uuid4().hex[:8]}"
    writer.send(thread["id"], fresh)
    signed_in.wait(lambda: fresh in signed_in.find("main").text, 12, "the new message")
    assert signed_in.driver.execute_script("return window.__sameDocument") == "yes"
    assert len(signed_in.find_all("article.message")) == 2


def test_post_without_the_csrf_token_is_refused_and_changes_nothing(
    signed_in: Dashboard, api: Api
) -> None:
    opener = api.agent("opener")
    api.agent("helper")
    thread = opener.open_thread("Guarded", ["helper"])
    opener.ok("POST", f"/threads/{thread['id']}/close-request", 202)
    cookies = {"inbots_session": signed_in.session_cookie()["value"]}
    close = f"{api.base_url}/threads/{thread['id']}/close"

    with httpx.Client(cookies=cookies, follow_redirects=False) as client:
        page = client.get(f"{api.base_url}/threads")
        assert page.status_code == 200
        match = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert match
        csrf = match.group(1)

        assert client.post(close, data={"next": "/threads"}).status_code == 403
        assert client.post(close, data={"csrf": "wrong", "next": "/threads"}).status_code == 403
        foreign = client.post(close, data={"csrf": csrf}, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403
        assert "nothing was changed" in foreign.text
        assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "close_requested"

        accepted = client.post(close, data={"csrf": csrf, "next": "/threads"})
        assert accepted.status_code == 303
        assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "closed"


def test_a_form_over_the_body_limit_shows_an_error_page_and_changes_nothing(
    signed_in: Dashboard, api: Api
) -> None:
    """A reply of more than 64 KiB (typed into the form past its own checks) is refused before
    it is read, as every request is, and the browser shows the dashboard's error page saying so
    rather than the API's JSON; the API still answers JSON."""
    opener = api.agent("opener")
    thread = opener.open_thread("Short replies only", ["operator"])
    opener.send(thread["id"], "Anything to add?")
    signed_in.go(f"/threads/{thread['id']}")
    signed_in.wait_for("#f-body")
    signed_in.driver.execute_script(
        "const f = document.getElementById('f-body'); f.removeAttribute('maxlength');"
        "f.value = 'x'.repeat(70000);"
    )
    signed_in.act("#send", lambda button: button.click())
    signed_in.wait(lambda: "Too large" in signed_in.find("main h1").text, what="the error page")
    message = signed_in.find("#error-message").text
    assert "larger than 65536 bytes" in message and "Nothing was changed" in message
    assert "nav-inbox" in signed_in.driver.page_source  # the dashboard's page, signed in
    signed_in.shot("too-large")
    history = opener.ok("GET", f"/threads/{thread['id']}/messages")["items"]
    assert [m["sender"] for m in history] == ["opener"]

    # (A send takes more, for its attachments: docs/configuration.md; any other route 64 KiB.)
    refused = httpx.post(
        f"{api.base_url}/v1/acks",
        headers={"Authorization": f"Bearer {opener.token}", "Accept": "text/html"},
        content=b"x" * 70_000,
    )
    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == "payload_too_large"


def test_revoking_the_operator_token_ends_the_session(dash: Dashboard, api: Api) -> None:
    laptop = api.ok("POST", "/tokens", 201, json={"label": "laptop"})
    dash.sign_in(laptop["token"])
    dash.wait(lambda: dash.path() == "/", what="the overview after sign-in")
    api.ok("DELETE", f"/tokens/{laptop['id']}", 204)
    dash.go("/threads")
    dash.wait(lambda: dash.path().startswith("/login"), what="the sign-in page")
    assert "session has ended" in dash.flash()


def test_deleting_the_token_row_ends_the_session(
    signed_in: Dashboard, api: Api, database: Database
) -> None:
    with unit_of_work(database) as uow:
        uow.session.execute(delete(OperatorToken))  # its sessions go with it (ON DELETE CASCADE)
    signed_in.go("/threads")
    signed_in.wait(lambda: signed_in.path().startswith("/login"), what="the sign-in page")
    assert "session has ended" in signed_in.flash()


def test_signing_out_ends_the_session_for_a_copied_cookie_too(
    signed_in: Dashboard, api: Api
) -> None:
    copied = signed_in.session_cookie()["value"]
    assert (
        httpx.get(api.base_url + "/agents", cookies={"inbots_session": copied}).status_code == 200
    )
    signed_in.find("#sign-out").click()
    assert signed_in.flash() == "Signed out."
    assert signed_in.path() == "/login"

    # The copy, put back into the browser, opens nothing any more.
    signed_in.driver.delete_all_cookies()
    signed_in.driver.add_cookie({"name": "inbots_session", "value": copied, "path": "/"})
    signed_in.go("/agents")
    signed_in.wait(lambda: signed_in.path().startswith("/login"), what="the sign-in page")
    assert "session has ended" in signed_in.flash()
    again = httpx.get(
        api.base_url + "/agents", cookies={"inbots_session": copied}, follow_redirects=False
    )
    assert again.status_code == 303 and again.headers["location"].startswith("/login")


@pytest.mark.parametrize(
    "settings_overrides",
    [{**FAST, "signin_max_failures_per_address": 2, "signin_window_seconds": 60}],
)
def test_the_sign_in_form_says_when_sign_in_is_throttled(dash: Dashboard, api: Api) -> None:
    for _ in range(2):
        dash.sign_in("ops_" + secrets.token_urlsafe(32))
        assert "not an operator token" in dash.wait_for("#login-error").text
    dash.sign_in(api.token)  # the right one, too late
    message = dash.wait_for("#login-error").text
    assert "Too many failed sign-ins from your address" in message
    assert "try again in 1 minute" in message
    assert dash.path().startswith("/login")
    dash.shot("login-throttled")


def test_an_unknown_thread_shows_a_friendly_message(signed_in: Dashboard) -> None:
    signed_in.go("/threads/th_00000000000000000000000000")
    message = signed_in.wait_for("#error-message").text
    assert "th_00000000000000000000000000" in message
    assert "Not found" in signed_in.find("main h1").text


# --- write actions: each through the API's service, checked in the browser and by the API -----


def fill(dash: Dashboard, values: dict[str, str]) -> None:
    """Type into the form fields named ``f-<name>`` (emptied first)."""
    for name, value in values.items():

        def type_in(element: WebElement, value: str = value) -> None:
            element.clear()
            if value:
                element.send_keys(value)

        # Found again if a live refresh swapped the page first (it never does under typed text).
        dash.act(f"#f-{name}", type_in)


def form_of(client: httpx.Client, url: str) -> str:
    """The CSRF token of a dashboard page, read as a browser would."""
    page = client.get(url)
    assert page.status_code == 200, page.text[:300]
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match
    return match.group(1)


def test_register_an_agent_shows_its_key_once_and_the_key_works(
    signed_in: Dashboard, api: Api
) -> None:
    signed_in.go("/agents")
    assert "inbots agents register NAME" in signed_in.wait_for("main").text  # the empty state
    signed_in.find("#new-agent").click()
    signed_in.wait_for("#agent-form")
    fill(signed_in, {"name": "builder", "description": "Builds things"})
    signed_in.find("#register").click()

    key = signed_in.wait_for("#api-key").get_attribute("value") or ""
    assert key.startswith("agt_")
    assert "Shown this once" in signed_in.find("#shown-once").text
    assert key not in signed_in.driver.current_url and signed_in.path() == "/agents/new"
    assert not signed_in.find_all("#signing-secret")  # no webhook, no secret
    signed_in.shot("agent-registered")

    agent = api.ok("GET", "/agents/builder")
    assert agent["description"] == "Builds things" and agent["status"] == "active"
    me = httpx.get(api.base_url + "/v1/me", headers={"Authorization": f"Bearer {key}"})
    assert me.status_code == 200 and me.json()["username"] == "builder"

    signed_in.find("#done").click()  # the agent's page: the key is not there any more
    signed_in.wait(lambda: signed_in.path() == f"/agents/{agent['id']}", what="the agent page")
    assert key not in signed_in.driver.page_source
    signed_in.go("/agents")
    assert key not in signed_in.wait_for('#agents tr[data-agent="builder"]').text

    # The answer holding the key is never cached, and the key is in no URL nor redirect.
    cookies = {"inbots_session": signed_in.session_cookie()["value"]}
    with httpx.Client(cookies=cookies, follow_redirects=False) as client:
        csrf = form_of(client, api.base_url + "/agents/new")
        answer = client.post(api.base_url + "/agents/new", data={"csrf": csrf, "name": "second"})
        assert answer.status_code == 200
        assert answer.headers["cache-control"] == "no-store"
        assert "location" not in answer.headers
        assert re.search(r'id="api-key"[^>]*value="agt_', answer.text)


def test_registering_a_taken_or_bad_name_shows_the_form_again(
    signed_in: Dashboard, api: Api
) -> None:
    api.agent("builder")
    signed_in.go("/agents/new")
    fill(signed_in, {"name": "builder", "description": "Second try"})
    signed_in.find("#register").click()
    error = signed_in.wait_for("#form-error").text
    assert "'builder' is taken" in error
    assert signed_in.find("#f-name").get_attribute("value") == "builder"
    assert signed_in.find("#f-name").get_attribute("aria-invalid") == "true"
    assert signed_in.find("#f-description").get_attribute("value") == "Second try"
    signed_in.shot("agent-register-error")

    fill(signed_in, {"name": "Not A Name!"})
    signed_in.find("#register").click()
    signed_in.wait(lambda: "Not A Name!" in signed_in.find("#form-error").text, what="the error")
    assert [a["username"] for a in api.ok("GET", "/agents")["items"]] == ["builder"]

    cookies = {"inbots_session": signed_in.session_cookie()["value"]}
    with httpx.Client(cookies=cookies, follow_redirects=False) as client:
        csrf = form_of(client, api.base_url + "/agents/new")
        answer = client.post(api.base_url + "/agents/new", data={"csrf": csrf, "name": "builder"})
        assert answer.status_code == 409 and 'id="form-error"' in answer.text
        nul = client.post(  # what no database can store: a form error, never a 500
            api.base_url + "/agents/new",
            data={"csrf": csrf, "name": "other", "description": "a\x00b"},
        )
        assert nul.status_code == 422 and "NUL" in nul.text
    assert [a["username"] for a in api.ok("GET", "/agents")["items"]] == ["builder"]


def test_set_a_webhook_and_rotate_its_secret(signed_in: Dashboard, api: Api) -> None:
    api.agent("hooked")
    agent_id = api.ok("GET", "/agents/hooked")["id"]
    with receiver(always(204)) as hook, receiver(always(204)) as moved:
        signed_in.go(f"/agents/{agent_id}")
        assert "polls its inbox" in signed_in.wait_for("#webhook").text
        fill(signed_in, {"url": hook.url})
        signed_in.find("#set-webhook").click()
        secret = signed_in.wait_for("#signing-secret").get_attribute("value") or ""
        assert secret.startswith("whsec_")
        assert not signed_in.find_all("#api-key")
        signed_in.shot("webhook-secret")
        webhook = api.ok("GET", "/agents/hooked/webhook")
        assert webhook["url"] == hook.url and webhook["signing_secret"] == secret

        signed_in.find("#done").click()  # a new URL keeps the secret: nothing to show
        signed_in.wait_for("#webhook-form")
        signed_in.shot("agent")
        fill(signed_in, {"url": moved.url})
        signed_in.find("#set-webhook").click()
        assert "signing secret is unchanged" in signed_in.flash()
        assert secret not in signed_in.driver.page_source
        assert api.ok("GET", "/agents/hooked/webhook")["url"] == moved.url

        signed_in.find("#rotate-secret").click()
        rotated = signed_in.wait_for("#signing-secret").get_attribute("value") or ""
        assert rotated.startswith("whsec_") and rotated != secret
        assert "previous secret keeps signing" in signed_in.find("#shown-once").text
        after = api.ok("GET", "/agents/hooked/webhook")
        assert after["signing_secret"] == rotated
        assert after["previous_secret_expires_at"] is not None


@pytest.mark.parametrize("settings_overrides", [{**FAST, "webhook_allow_private": False}])
def test_a_webhook_url_the_policy_refuses_is_a_form_error(signed_in: Dashboard, api: Api) -> None:
    api.agent("guarded")
    agent_id = api.ok("GET", "/agents/guarded")["id"]
    signed_in.go(f"/agents/{agent_id}")
    fill(signed_in, {"url": "http://169.254.169.254/latest/meta-data"})
    signed_in.find("#set-webhook").click()
    error = signed_in.wait_for("#form-error").text
    assert "169.254.169.254" in error or "private" in error or "not allowed" in error, error
    assert (
        signed_in.find("#f-url").get_attribute("value") == "http://169.254.169.254/latest/meta-data"
    )
    assert signed_in.find("main h1").text.startswith("guarded")
    signed_in.shot("webhook-refused")
    assert api.get("/agents/guarded/webhook").status_code == 404

    signed_in.go("/agents/new")  # and at registration, on the same form
    fill(signed_in, {"name": "sneaky", "webhook_url": "http://127.0.0.1:9/hook"})
    signed_in.find("#register").click()
    assert signed_in.wait_for("#form-error").text
    assert signed_in.find("#f-webhook_url").get_attribute("aria-invalid") == "true"
    assert api.get("/agents/sneaky").status_code == 404


def test_archive_an_agent_after_confirming(signed_in: Dashboard, api: Api) -> None:
    retiring = api.agent("retiring")
    agent_id = api.ok("GET", "/agents/retiring")["id"]
    signed_in.go("/agents")
    signed_in.wait_for('#agents tr[data-agent="retiring"] a.agent-link').click()
    signed_in.wait_for("#archive-form")
    signed_in.find("#archive-agent").click()  # not confirmed: the browser keeps the form
    assert signed_in.path() == f"/agents/{agent_id}"
    assert api.ok("GET", "/agents/retiring")["status"] == "active"

    cookies = {"inbots_session": signed_in.session_cookie()["value"]}
    with httpx.Client(cookies=cookies, follow_redirects=False) as client:
        url = f"{api.base_url}/agents/{agent_id}/archive"
        csrf = form_of(client, f"{api.base_url}/agents/{agent_id}")
        unconfirmed = client.post(url, data={"csrf": csrf})  # nor does the server, without it
        assert unconfirmed.status_code == 422 and "Tick the box" in unconfirmed.text
    assert api.ok("GET", "/agents/retiring")["status"] == "active"

    signed_in.find("#f-confirm").send_keys(" ")  # the keyboard ticks it
    signed_in.find("#archive-agent").click()
    assert "retiring archived" in signed_in.flash()
    assert signed_in.find('#archived tr[data-agent="retiring"] .badge').text == "archived"
    assert api.ok("GET", "/agents/retiring")["status"] == "archived"
    assert retiring.get("/me").status_code == 401
    signed_in.go(f"/agents/{agent_id}")
    assert "archived" in signed_in.wait_for("#archived-note").text
    assert not signed_in.find_all("#archive-form") and not signed_in.find_all("#webhook-form")


def test_open_a_thread_with_a_first_message_and_post_into_it(
    signed_in: Dashboard, api: Api
) -> None:
    alice = api.agent("alice")
    bob = api.agent("bob")
    api.agent("carol")
    signed_in.go("/threads")
    signed_in.wait_for("#new-thread").click()
    signed_in.wait_for("#thread-form")
    fill(signed_in, {"title": "Ship 1.2", "body": "Nobody was chosen"})
    signed_in.find("#open-thread").click()  # nobody to write to: the form again, as typed
    assert "at least one agent" in signed_in.wait_for("#form-error").text
    assert signed_in.find("#f-title").get_attribute("value") == "Ship 1.2"
    assert signed_in.find("#f-body").get_attribute("value") == "Nobody was chosen"
    assert api.ok("GET", "/threads")["items"] == []

    for name in ("alice", "bob"):
        signed_in.find(f'#participants input[value="{name}"]').click()
    fill(
        signed_in,
        {"goal": "Tagged and published", "body": "Please tag v1.2.", "summary": "Tag v1.2"},
    )
    signed_in.find('#f-priority option[value="urgent"]').click()
    signed_in.find("#open-thread").click()
    assert signed_in.flash() == "Thread opened and your message sent."
    thread_id = signed_in.path().removeprefix("/threads/")
    assert "Ship 1.2" in signed_in.find("#thread-title").text
    thread = api.ok("GET", f"/threads/{thread_id}")
    assert thread["goal"] == "Tagged and published" and thread["opened_by"] == "operator"
    assert sorted(thread["participants"]) == ["alice", "bob", "operator"]
    mail = alice.ok("GET", "/inbox")["items"]
    assert [(m["summary"], m["priority"], m["sender"]) for m in mail] == [
        ("Tag v1.2", "urgent", "operator")
    ]

    fill(signed_in, {"body": "Also update the changelog."})
    signed_in.find("#send").click()
    assert signed_in.flash() == "Message sent to 2 recipients."
    signed_in.wait(lambda: "Also update the changelog." in signed_in.find("main").text)
    history = bob.ok("GET", f"/threads/{thread_id}/messages")["items"]
    assert [m["body"] for m in history] == ["Please tag v1.2.", "Also update the changelog."]
    signed_in.shot("thread-posted")


def test_posting_into_a_closed_thread_is_a_form_error(signed_in: Dashboard, api: Api) -> None:
    opener = api.agent("opener")
    api.agent("helper")
    thread = opener.open_thread("Soon closed", ["helper"])
    signed_in.go(f"/threads/{thread['id']}")
    fill(signed_in, {"body": "Late words"})
    api.ok("POST", f"/threads/{thread['id']}/close")  # closed while the operator typed
    signed_in.find("#send").click()
    assert "closed" in signed_in.wait_for("#form-error").text
    assert signed_in.find("#f-body").get_attribute("value") == "Late words"
    assert api.ok("GET", f"/threads/{thread['id']}/messages")["items"] == []


def test_operator_inbox_reads_replies_and_acknowledges(signed_in: Dashboard, api: Api) -> None:
    asker = api.agent("asker")
    asked = asker.ok(
        "POST",
        "/messages",
        201,
        json={"to": ["operator"], "body": "May I deploy on Friday?", "summary": "Deploy Friday?"},
    )
    delivery_id = asked["deliveries"][0]["id"]
    assert asked["deliveries"][0]["recipient"] == "operator"

    signed_in.go("/")
    assert signed_in.wait_for("#nav-inbox-count").text == "1"
    signed_in.find("#nav-inbox").click()
    row = f'#inbox tr[data-delivery="{delivery_id}"]'
    row_text = signed_in.act(row, lambda element: element.text)
    assert "asker" in row_text and "Deploy Friday?" in row_text
    assert api.ok("GET", "/inbox")["items"][0]["state"] == "delivered"  # the listing showed it
    signed_in.shot("inbox")

    signed_in.act(f"{row} a.title", lambda link: link.click())
    assert signed_in.wait_for("#message-body").text == "May I deploy on Friday?"
    signed_in.shot("inbox-message")
    receipt = asker.ok("GET", "/outbox")["items"][0]["receipts"][0]
    assert receipt["state"] == "fetched"

    fill(signed_in, {"body": "Yes, after 14:00."})
    signed_in.find("#send-reply").click()
    assert signed_in.flash() == "Reply sent."
    reply = asker.ok("GET", "/inbox", params={"include": "body"})["items"][0]
    assert reply["body"] == "Yes, after 14:00." and reply["sender"] == "operator"
    message = asker.ok("GET", f"/messages/{reply['message_id']}")["message"]
    assert message["reply_to"] == asked["message"]["id"]

    signed_in.find('#ack-form input[value="declined"]').click()
    fill(signed_in, {"note": "Not this week after all"})
    signed_in.find("#acknowledge").click()
    assert signed_in.flash().startswith("Declined")
    assert signed_in.path() == "/inbox"
    assert "Nothing waiting" in signed_in.wait_for("#inbox-empty").text
    assert signed_in.find("#nav-inbox-count").text == "0"
    receipt = asker.ok("GET", "/outbox")["items"][0]["receipts"][0]
    assert (receipt["state"], receipt["outcome"], receipt["note"]) == (
        "acknowledged",
        "declined",
        "Not this week after all",
    )
    signed_in.go(f"/inbox/{delivery_id}")
    assert "declined" in signed_in.wait_for("#acknowledged").text
    assert not signed_in.find_all("#ack-form")


def test_the_inbox_count_in_the_nav_updates_without_reload(signed_in: Dashboard, api: Api) -> None:
    signed_in.go("/threads")
    assert signed_in.wait_for("#nav-inbox-count").text == "0"
    signed_in.driver.execute_script("window.__sameDocument = 'yes';")
    api.agent("pinger").ok("POST", "/messages", 201, json={"to": ["operator"], "body": "ping"})
    signed_in.wait(lambda: signed_in.find("#nav-inbox-count").text == "1", 12, "the new count")
    assert signed_in.driver.execute_script("return window.__sameDocument") == "yes"


def test_the_approvals_count_in_the_nav_updates_without_reload(
    signed_in: Dashboard, api: Api
) -> None:
    api.ok("PUT", "/policy", json=APPROVAL_POLICY)
    lead, _worker = api.agent("lead"), api.agent("worker")
    signed_in.go("/agents")
    assert signed_in.wait_for("#nav-approvals-count").text == "0"
    signed_in.driver.execute_script("window.__sameDocument = 'yes';")
    thread = lead.open_thread("Ops", ["worker"])["id"]
    lead.send(thread, "Restart the cluster", kind="task", summary="Restart it")
    signed_in.wait(lambda: signed_in.find("#nav-approvals-count").text == "1", 12, "the count")
    assert signed_in.driver.execute_script("return window.__sameDocument") == "yes"


def test_the_overview_counts_every_state_and_they_add_up_to_the_total(
    signed_in: Dashboard, api: Api
) -> None:
    """Held and rejected mail (and every other state) has its chip: the chips add up to the
    deliveries stored."""
    assert set(STATE_CHIPS) == set(STATES)
    api.ok("PUT", "/policy", json=APPROVAL_POLICY)
    lead, worker = api.agent("lead"), api.agent("worker")
    thread = lead.open_thread("Ops", ["worker"])["id"]
    lead.send(thread, "Status: all green")
    held = lead.send(thread, "Restart the cluster", kind="task", summary="Restart it")
    refused = lead.send(thread, "Wipe the cache", kind="task", summary="Wipe it")
    api.ok("POST", f"/approvals/{refused['message']['id']}/reject", json={"reason": "No"})
    assert held["held"] is True
    signed_in.go("/")

    def chips() -> dict[str, int]:
        counted: dict[str, int] = {}
        for chip in signed_in.find_all(".state-chip"):
            strong = chip.find_element(By.CSS_SELECTOR, "strong")
            counted[chip.get_attribute("data-state") or ""] = int(strong.text)
        return counted

    shown = signed_in.read(chips)
    assert set(shown) == set(STATES), shown
    assert (shown["held"], shown["rejected"]) == (1, 1), shown
    assert sum(shown.values()) == 3, shown
    assert worker.inbox()["returned"] == 1


def test_new_actions_refuse_a_missing_or_wrong_csrf_token_and_a_foreign_origin(
    signed_in: Dashboard, api: Api
) -> None:
    asker = api.agent("asker")
    sent = asker.ok("POST", "/messages", 201, json={"to": ["operator"], "body": "hi"})
    delivery_id = sent["deliveries"][0]["id"]
    cookies = {"inbots_session": signed_in.session_cookie()["value"]}
    with httpx.Client(cookies=cookies, follow_redirects=False) as client:
        csrf = form_of(client, api.base_url + "/agents/new")
        register = api.base_url + "/agents/new"
        ack = f"{api.base_url}/inbox/{delivery_id}/ack"
        for url, data in ((register, {"name": "intruder"}), (ack, {"outcome": "done"})):
            assert client.post(url, data=data).status_code == 403
            assert client.post(url, data={**data, "csrf": "wrong"}).status_code == 403
            foreign = client.post(
                url, data={**data, "csrf": csrf}, headers={"Origin": "http://evil.example"}
            )
            assert foreign.status_code == 403 and "nothing was changed" in foreign.text
        assert api.get("/agents/intruder").status_code == 404
        assert asker.ok("GET", "/outbox")["items"][0]["receipts"][0]["acknowledged_at"] is None

        assert client.post(register, data={"csrf": csrf, "name": "welcome"}).status_code == 200
        assert api.ok("GET", "/agents/welcome")["status"] == "active"
        nul = client.post(ack, data={"csrf": csrf, "outcome": "done", "note": "x\x00y"})
        assert nul.status_code == 422 and 'id="form-error"' in nul.text
        assert asker.ok("GET", "/outbox")["items"][0]["receipts"][0]["acknowledged_at"] is None
        assert client.post(ack, data={"csrf": csrf, "outcome": "done"}).status_code == 303
        assert asker.ok("GET", "/outbox")["items"][0]["receipts"][0]["outcome"] == "done"


def test_a_reply_goes_where_the_delivery_in_its_path_says_never_elsewhere(
    signed_in: Dashboard, api: Api
) -> None:
    """The reply form's thread and message come from the operator's own delivery in the URL:
    a delivery that is not the operator's is 404 and posts nothing; thread or message fields
    added to the form change nothing."""
    asker, other = api.agent("asker"), api.agent("other")
    asked = asker.ok("POST", "/messages", 201, json={"to": ["operator"], "body": "Ship it?"})
    mine = asked["deliveries"][0]["id"]
    elsewhere = api.open_thread("Not a reply", ["other"])["id"]
    to_other = api.send(elsewhere, "for other")["deliveries"][0]["id"]  # the operator's send
    cookies = {"inbots_session": signed_in.session_cookie()["value"]}
    with httpx.Client(cookies=cookies, follow_redirects=False) as client:
        csrf = form_of(client, f"{api.base_url}/inbox/{mine}")
        refused = client.post(
            f"{api.base_url}/inbox/{to_other}/reply", data={"csrf": csrf, "body": "sneaky"}
        )
        assert refused.status_code == 404, refused.text
        assert [m["body"] for m in api.ok("GET", f"/threads/{elsewhere}")["messages"]] == [
            "for other"
        ]
        posted = client.post(
            f"{api.base_url}/inbox/{mine}/reply",
            data={"csrf": csrf, "body": "Yes", "thread_id": elsewhere, "message_id": "msg_x"},
        )
        assert posted.status_code == 303, posted.text
    (reply,) = asker.inbox(include="body")["items"]
    assert reply["body"] == "Yes" and reply["thread_id"] == asked["message"]["thread_id"]
    read = asker.ok("GET", f"/messages/{reply['message_id']}")["message"]
    assert read["reply_to"] == asked["message"]["id"]
    assert other.inbox()["returned"] == 1  # only the operator's first send


def test_another_workspaces_agents_and_mail_stay_out_of_reach(
    signed_in: Dashboard, api: Api, other_api: Api
) -> None:
    stranger = other_api.agent("stranger")
    stranger_id = other_api.ok("GET", "/agents/stranger")["id"]
    theirs = stranger.ok("POST", "/messages", 201, json={"to": ["operator"], "body": "secret"})
    their_delivery = theirs["deliveries"][0]["id"]
    cookies = {"inbots_session": signed_in.session_cookie()["value"]}
    with httpx.Client(cookies=cookies, follow_redirects=False) as client:
        assert client.get(f"{api.base_url}/agents/{stranger_id}").status_code == 404
        page = client.get(f"{api.base_url}/inbox/{their_delivery}")
        assert page.status_code == 404 and "secret" not in page.text
        assert "stranger" not in client.get(f"{api.base_url}/inbox?status=all").text
        csrf = form_of(client, api.base_url + "/agents/new")
        archive = client.post(
            f"{api.base_url}/agents/{stranger_id}/archive", data={"csrf": csrf, "confirm": "yes"}
        )
        assert archive.status_code == 404
        ack = client.post(
            f"{api.base_url}/inbox/{their_delivery}/ack", data={"csrf": csrf, "outcome": "done"}
        )
        assert ack.status_code == 404
    assert other_api.ok("GET", "/agents/stranger")["status"] == "active"
    assert other_api.ok("GET", "/inbox")["waiting"] == 1


def test_typed_text_survives_the_live_refresh(signed_in: Dashboard, api: Api) -> None:
    """The thread page refreshes itself, but never over a message the operator is writing."""
    writer = api.agent("writer")
    api.agent("reader")
    thread = writer.open_thread("Busy", ["reader"])
    signed_in.go(f"/threads/{thread['id']}")
    fill(signed_in, {"body": "half a thought"})
    signed_in.find("#thread-title").click()  # the field loses focus, the text stays unsent
    writer.send(thread["id"], "arrived meanwhile")
    time.sleep(4.5)  # longer than the refresh interval
    assert signed_in.find("#f-body").get_attribute("value") == "half a thought"
    assert "arrived meanwhile" not in signed_in.find("main").text

    fill(signed_in, {"body": ""})  # nothing unsent any more: the page catches up by itself
    signed_in.act("#thread-title", lambda title: title.click())  # it may have refreshed already
    signed_in.wait(lambda: "arrived meanwhile" in signed_in.find("main").text, 12, "the refresh")


# The approval queue (the approval gate's held messages).

APPROVAL_POLICY = {"approval": {"kinds": ["task"], "priorities": [], "senders": []}}


def test_the_queue_approves_and_rejects_held_messages(signed_in: Dashboard, api: Api) -> None:
    api.ok("PUT", "/policy", json=APPROVAL_POLICY)
    lead = api.agent("lead")
    worker = api.agent("worker")
    thread = lead.open_thread("Ops", ["worker"])["id"]
    first = lead.send(thread, "Restart the cluster", kind="task", summary="Restart it")
    second = lead.send(thread, "Wipe the cache", kind="task", summary="Wipe it")
    first_id, second_id = first["message"]["id"], second["message"]["id"]

    signed_in.go("/")
    assert signed_in.wait_for("#nav-approvals-count").text == "2"
    signed_in.find("#nav-approvals").click()

    def queue() -> list[tuple[str | None, str]] | None:
        rows = signed_in.find_all("#approvals tbody tr")
        return [(r.get_attribute("data-message"), r.text) for r in rows] or None

    rows = signed_in.wait(queue, what="the queue")
    assert [message for message, _text in rows] == [first_id, second_id]
    assert "lead" in rows[0][1] and "Restart it" in rows[0][1]
    assert "task" in signed_in.find("#approval-policy").text
    signed_in.shot("approvals")

    signed_in.act(f'tr[data-message="{first_id}"] button.approve', lambda b: b.click())
    assert signed_in.flash().startswith(f"Approved {first_id}")
    assert signed_in.path() == "/approvals"
    assert [i["message_id"] for i in worker.inbox()["items"]] == [first_id]
    assert signed_in.find("#nav-approvals-count").text == "1"

    # Once the reason holds text the page no longer refreshes under it (the form is busy).
    reason = f'tr[data-message="{second_id}"] input.reason'
    signed_in.act(reason, lambda field: field.send_keys("Not during business hours"))
    signed_in.act(f'tr[data-message="{second_id}"] button.reject', lambda b: b.click())
    assert signed_in.flash().startswith(f"Rejected {second_id}")
    assert "Nothing waits" in signed_in.wait_for("#approvals-empty").text
    assert signed_in.find("#nav-approvals-count").text == "0"
    receipt = lead.ok("GET", f"/messages/{second_id}")["receipts"][0]
    assert receipt["state"] == "rejected"
    assert receipt["rejection_reason"] == "Not during business hours"
    assert [i["message_id"] for i in worker.inbox()["items"]] == [first_id]


def test_a_live_page_keeps_its_elements_until_something_changes_then_shows_it(
    signed_in: Dashboard, api: Api
) -> None:
    """The page fetches itself every few seconds; an answer whose digest matches what is shown
    leaves <main> alone (a field, a selection, an element a script holds all survive), and one
    that differs is swapped in without a reload."""
    api.ok("PUT", "/policy", json=APPROVAL_POLICY)
    lead = api.agent("lead")
    api.agent("worker")
    thread = lead.open_thread("Live", ["worker"])["id"]
    signed_in.go("/approvals")
    empty = signed_in.wait_for("#approvals-empty")
    digest = signed_in.find("#main").get_attribute("data-digest")
    assert digest and len(digest) == 16

    def refreshes() -> int:
        found: int = signed_in.driver.execute_script(
            "return performance.getEntriesByType('resource')"
            ".filter(e => e.initiatorType === 'fetch').length"
        )
        return found

    signed_in.wait(lambda: refreshes() >= 2, 15, "two live refreshes")
    assert "Nothing waits" in empty.text  # not stale: the same element, never swapped
    assert signed_in.find("#main").get_attribute("data-digest") == digest

    held = lead.send(thread, "Deploy it", kind="task")["message"]["id"]
    row = signed_in.wait_for(f'tr[data-message="{held}"]', 15)
    assert "lead" in row.text
    assert signed_in.find("#main").get_attribute("data-digest") != digest
    assert signed_in.path() == "/approvals"
    with pytest.raises(StaleElementReferenceException):
        empty.is_displayed()


def test_queue_actions_refuse_a_missing_or_wrong_csrf_token_and_a_foreign_origin(
    signed_in: Dashboard, api: Api
) -> None:
    api.ok("PUT", "/policy", json=APPROVAL_POLICY)
    lead = api.agent("lead")
    api.agent("worker")
    thread = lead.open_thread("Guarded", ["worker"])["id"]
    held = lead.send(thread, "Held", kind="task")["message"]["id"]
    cookies = {"inbots_session": signed_in.session_cookie()["value"]}
    with httpx.Client(cookies=cookies, follow_redirects=False) as client:
        csrf = form_of(client, api.base_url + "/approvals")
        for action in ("approve", "reject"):
            url = f"{api.base_url}/approvals/{held}/{action}"
            assert client.post(url, data={}).status_code == 403
            assert client.post(url, data={"csrf": "wrong"}).status_code == 403
            foreign = client.post(
                url, data={"csrf": csrf}, headers={"Origin": "http://evil.example"}
            )
            assert foreign.status_code == 403
        assert [i["message_id"] for i in api.ok("GET", "/approvals")["items"]] == [held]
        # A reason the database cannot hold is said, and changes nothing.
        bad = client.post(
            f"{api.base_url}/approvals/{held}/reject", data={"csrf": csrf, "reason": "a\x00b"}
        )
        assert bad.status_code == 303
        assert [i["message_id"] for i in api.ok("GET", "/approvals")["items"]] == [held]
        done = client.post(f"{api.base_url}/approvals/{held}/approve", data={"csrf": csrf})
        assert done.status_code == 303 and done.headers["location"] == "/approvals"
        assert api.ok("GET", "/approvals")["items"] == []
        again = client.post(f"{api.base_url}/approvals/{held}/approve", data={"csrf": csrf})
        assert again.status_code == 303  # said as a flash: not_held
