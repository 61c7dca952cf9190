"""Dashboard sessions and the sign-in throttle, over real HTTP against a real server, on SQLite
and PostgreSQL: the session is a database row, so signing out or revoking the token ends it for
every copy of the cookie; failed sign-ins are counted per client address and for the whole
deployment, logged without the token and counted in ``/metrics``.

(The browser tests in ``test_dashboard.py`` cover the same through Chromium, on SQLite.)
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy import select

from inbots.db.engine import Database
from inbots.kit.tokens import OPERATOR_TOKEN_PREFIX, hash_token, mint
from tests.helpers import Api, metric_samples, sample

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Browser:
    """One browser's cookie jar, talking to the dashboard like the sign-in form does."""

    client: httpx.Client

    def csrf(self, path: str = "/login") -> str:
        page = self.client.get(path)
        match = CSRF.search(page.text)
        assert match, (page.status_code, page.text[:300])
        return match.group(1)

    def sign_in(self, token: str) -> httpx.Response:
        return self.client.post(
            "/login", data={"token": token, "csrf": self.csrf(), "next": "/threads"}
        )

    def sign_out(self) -> httpx.Response:
        return self.client.post("/logout", data={"csrf": self.csrf("/")})

    @property
    def cookie(self) -> str:
        value = self.client.cookies.get("inbots_session")
        assert value, "no session cookie"
        return value


def browser(base_url: str, *, address: str | None = None, cookie: str | None = None) -> Browser:
    transport = httpx.HTTPTransport(local_address=address) if address else None
    client = httpx.Client(
        base_url=base_url, follow_redirects=False, timeout=30, transport=transport
    )
    if cookie:
        client.cookies.set("inbots_session", cookie)
    return Browser(client)


@pytest.fixture
def dash(api: Api) -> Iterator[Browser]:
    page = browser(api.base_url)
    yield page
    page.client.close()


def signed_in(answer: httpx.Response) -> bool:
    return answer.status_code == 303 and answer.headers["location"] == "/threads"


def on_a_page(page: Browser) -> bool:
    """Whether the cookie still opens a page (else the answer sends it to sign in)."""
    answer = page.client.get("/agents")
    if answer.status_code == 200:
        return True
    assert answer.status_code == 303 and answer.headers["location"].startswith("/login"), answer
    return False


# --- sessions --------------------------------------------------------------------------------


def test_a_copied_cookie_stops_working_after_sign_out(dash: Browser, api: Api) -> None:
    api.agent("worker")
    thread = api.open_thread("Still open", ["worker"])
    assert signed_in(dash.sign_in(api.token))
    stolen = dash.cookie  # say, copied from the machine before the operator signed out
    assert on_a_page(browser(api.base_url, cookie=stolen))
    csrf = browser(api.base_url, cookie=stolen).csrf("/")

    assert dash.sign_out().status_code == 303
    assert not on_a_page(browser(api.base_url, cookie=stolen)), "the copy works after sign-out"
    assert not on_a_page(dash)
    # An action with the copied cookie and its CSRF token is refused and changes nothing.
    copy = browser(api.base_url, cookie=stolen)
    action = copy.client.post(f"/threads/{thread['id']}/close", data={"csrf": csrf})
    assert action.status_code == 303 and action.headers["location"].startswith("/login")
    assert api.ok("GET", f"/threads/{thread['id']}")["status"] == "open"


# 3 s: sign-in and the first page must fit inside it on a loaded machine (1 s once did not).
@pytest.mark.parametrize("settings_overrides", [{"session_max_age_seconds": 3.0}])
def test_a_session_ends_at_its_maximum_age(dash: Browser, api: Api) -> None:
    assert signed_in(dash.sign_in(api.token))
    assert on_a_page(dash)
    time.sleep(3.5)  # from the first page on: the session is older than 3 s whatever came before
    assert not on_a_page(dash)


def test_revoking_an_operator_token_ends_its_sessions_at_once(dash: Browser, api: Api) -> None:
    second = api.ok("POST", "/tokens", 201, json={"label": "laptop"})
    assert signed_in(dash.sign_in(second["token"]))
    other = browser(api.base_url)  # a second browser, signed in with the first token
    assert signed_in(other.sign_in(api.token))

    api.ok("DELETE", f"/tokens/{second['id']}", 204)
    assert not on_a_page(dash), "a session of the revoked token still works"
    assert on_a_page(other), "revoking one token ended another token's session"
    refused = dash.sign_in(second["token"])
    assert refused.status_code == 401 and "not an operator token" in refused.text


def test_the_session_row_holds_only_a_hash_of_the_cookies_key(
    dash: Browser, api: Api, database: Database
) -> None:
    from inbots.models.auth import DashboardSession

    assert signed_in(dash.sign_in(api.token))
    with database.engine.connect() as conn:
        rows = conn.execute(select(DashboardSession)).all()
    assert len(rows) == 1
    stored = " ".join(str(value) for value in rows[0])
    assert api.token not in stored and api.token not in dash.cookie
    assert rows[0].revoked_at is None and rows[0].expires_at > rows[0].created_at
    dash.sign_out()
    with database.engine.connect() as conn:
        assert conn.execute(select(DashboardSession.revoked_at)).scalar_one() is not None
    assert len(rows[0].key_hash) == len(hash_token("x"))


# --- the sign-in throttle -------------------------------------------------------------------

THROTTLE = {"signin_max_failures_per_address": 5, "signin_window_seconds": 3.0}


def wrong_token() -> str:
    return mint(OPERATOR_TOKEN_PREFIX)


def signin_failures(api: Api) -> dict[str, float]:
    samples = metric_samples(api.client.get("/metrics").text)
    return {
        reason: sample(samples, "inbots_signin_failures_total", reason=reason)
        for reason in ("bad_token", "throttled_address", "throttled_deployment")
    }


@pytest.mark.parametrize("settings_overrides", [THROTTLE])
def test_many_wrong_sign_ins_are_throttled_and_then_the_right_token_waits(
    dash: Browser, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    before = signin_failures(api)
    guesses = [wrong_token() for _ in range(5)]
    with caplog.at_level(logging.INFO, logger="inbots.auth"):
        for guess in guesses:
            assert dash.sign_in(guess).status_code == 401
        held = dash.sign_in(wrong_token())
        assert held.status_code == 429, held.text
        assert "Too many failed sign-ins from your address" in held.text
        assert 1 <= int(held.headers["retry-after"]) <= 3
        right = dash.sign_in(api.token)
        assert right.status_code == 429, "the right token got in while sign-in was throttled"
        as_json = dash.client.post(
            "/login",
            data={"token": api.token, "csrf": dash.csrf()},
            headers={"Accept": "application/json"},
        )
        assert as_json.status_code == 429
        assert as_json.json()["error"]["code"] == "rate_limited"
        assert "try again in" in as_json.json()["error"]["message"]

    after = signin_failures(api)
    assert after["bad_token"] - before["bad_token"] == 5
    assert after["throttled_address"] - before["throttled_address"] == 3
    refused = [r for r in caplog.records if "sign-in refused" in r.getMessage()]
    throttled = [r for r in caplog.records if "sign-in throttled" in r.getMessage()]
    assert len(refused) == 5 and len(throttled) == 3
    for record in caplog.records:
        line = record.getMessage() + " " + " ".join(map(str, vars(record).values()))
        for token in [*guesses, api.token]:
            assert token not in line and token[4:] not in line
    assert all(r.levelno == logging.WARNING and r.client == "127.0.0.1" for r in refused)

    time.sleep(3.1)  # the window passes: the failures no longer count
    assert signed_in(dash.sign_in(api.token))


@pytest.mark.parametrize(
    "settings_overrides",
    [{"signin_max_failures_per_address": 3, "signin_max_failures": 5, "signin_window_seconds": 60}],
)
def test_wrong_sign_ins_from_many_addresses_throttle_the_deployment(api: Api) -> None:
    """A wrong token names no workspace, so beyond each address's own limit every failure also
    counts toward one bucket for the whole deployment."""
    first = browser(api.base_url, address="127.0.0.2")
    for _ in range(3):
        assert first.sign_in(wrong_token()).status_code == 401
    assert first.sign_in(wrong_token()).status_code == 429  # this address is done
    second = browser(api.base_url, address="127.0.0.3")
    for _ in range(2):
        assert second.sign_in(wrong_token()).status_code == 401
    third = browser(api.base_url, address="127.0.0.4")  # never failed, but the deployment has
    held = third.sign_in(api.token)
    assert held.status_code == 429 and "to this Inbots" in held.text
    api.ok("GET", "/agents")  # the API's bearer tokens are not throttled by sign-ins


@pytest.mark.parametrize(
    "settings_overrides", [{"signin_max_failures_per_address": 4, "signin_window_seconds": 60}]
)
def test_parallel_wrong_sign_ins_get_no_more_tries_than_sequential_ones(
    dash: Browser, api: Api
) -> None:
    csrf, cookie = dash.csrf(), dash.cookie
    answers: list[int] = []

    def guess() -> None:
        with httpx.Client(base_url=api.base_url, timeout=60) as client:
            client.cookies.set("inbots_session", cookie)
            answer = client.post("/login", data={"token": wrong_token(), "csrf": csrf})
            answers.append(answer.status_code)

    threads = [threading.Thread(target=guess) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [401] * 4 + [429] * 20, answers
