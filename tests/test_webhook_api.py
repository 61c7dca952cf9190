"""The webhook API over real HTTP: registering, reading, changing, removing and rotating an agent's
webhook (by the operator and by the agent itself), the URL guard at registration, and redelivery
against real receivers on loopback."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import standardwebhooks
from svix.webhooks import Webhook as SvixWebhook

from inbots.webhooks import BadSignature, verify
from tests.helpers import Api, Caller, assert_error
from tests.receivers import Received, always, receiver

FAST = {"retry_schedule": "0.2,0.4,0.8", "webhook_timeout_seconds": 1.0, "publish_lost_seconds": 8}

PRIVATE_BLOCKED = pytest.mark.parametrize(
    "settings_overrides", [{**FAST, "webhook_allow_private": False}], ids=["private-blocked"]
)

# A public target written as an IP literal: no DNS, and nothing is ever sent to it here.
PUBLIC_URL = "https://93.184.215.14/inbots-hook"
# A loopback URL nothing listens on; fine while private targets are allowed and nothing is sent.
IDLE_URL = "http://127.0.0.1:9/hook"
SECRET_RE = re.compile(r"whsec_[A-Za-z0-9+/]{43}=")
ROTATION_OVERLAP = timedelta(hours=24)


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return dict(FAST)


# --- helpers -----------------------------------------------------------------------------------


def register(api: Api, name: str, webhook_url: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if webhook_url is not None:
        body["webhook_url"] = webhook_url
    return api.ok("POST", "/agents", 201, json=body)  # type: ignore[no-any-return]


def as_agent(api: Api, created: dict[str, Any]) -> Caller:
    return Caller(api.client, created["api_key"], created["username"])


def assert_secret(secret: object) -> None:
    assert isinstance(secret, str) and SECRET_RE.fullmatch(secret), secret
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def wait_for(fetch: Callable[[], dict[str, Any]], done: Callable[[dict[str, Any]], bool]) -> Any:
    deadline = time.monotonic() + 10
    while True:
        current = fetch()
        if done(current) or time.monotonic() > deadline:
            return current
        time.sleep(0.05)


def lowered(request: Received) -> dict[str, str]:
    return {k.lower(): v for k, v in request.headers.items()}


def send_to(api: Api, recipient: str) -> str:
    """A sender agent opens a thread with ``recipient`` and sends; returns the delivery id."""
    sender = api.agent("sender")
    thread = sender.open_thread("Webhook task", [recipient])
    sent = sender.send(thread["id"], "please look", summary="Please look", kind="question")
    (delivery,) = sent["deliveries"]
    assert delivery["recipient"] == recipient
    return str(delivery["id"])


def agent_row(api: Api, agent_id: str) -> dict[str, Any]:
    return api.ok("GET", f"/agents/{agent_id}")  # type: ignore[no-any-return]


# --- registration, PUT, GET, DELETE ------------------------------------------------------------


def test_registration_with_webhook_url_returns_url_and_signing_secret(api: Api) -> None:
    created = register(api, "hooked", IDLE_URL)
    webhook = created["webhook"]
    assert webhook["url"] == IDLE_URL
    assert_secret(webhook["signing_secret"])
    assert created["webhook_url"] == IDLE_URL
    read = api.ok("GET", f"/agents/{created['id']}/webhook")
    assert read == {
        "url": IDLE_URL,
        "signing_secret": webhook["signing_secret"],
        "previous_secret_expires_at": None,
        "webhook_events": ["message.created"],
    }
    assert agent_row(api, created["id"])["webhook_url"] == IDLE_URL


def test_registration_without_webhook_url_has_no_webhook(api: Api) -> None:
    created = register(api, "plain")
    assert created["webhook"] is None
    assert created["webhook_url"] is None
    assert_error(api.get(f"/agents/{created['id']}/webhook"), 404, "not_found")


def test_registered_secrets_differ_between_agents(api: Api) -> None:
    one = register(api, "one", IDLE_URL)["webhook"]["signing_secret"]
    two = register(api, "two", IDLE_URL)["webhook"]["signing_secret"]
    assert one != two


def test_get_webhook_is_404_when_agent_has_none(api: Api) -> None:
    created = register(api, "bare")
    for ref in (created["id"], created["username"]):
        assert_error(api.get(f"/agents/{ref}/webhook"), 404, "not_found")


def test_put_sets_webhook_and_mints_a_secret(api: Api) -> None:
    created = register(api, "later")
    put = api.ok("PUT", f"/agents/{created['id']}/webhook", json={"url": IDLE_URL})
    assert put["url"] == IDLE_URL
    assert_secret(put["signing_secret"])
    read = api.ok("GET", f"/agents/{created['id']}/webhook")
    assert read["url"] == IDLE_URL
    assert read["signing_secret"] == put["signing_secret"]
    assert read["previous_secret_expires_at"] is None
    assert agent_row(api, created["id"])["webhook_url"] == IDLE_URL


def test_put_changing_url_keeps_the_secret(api: Api) -> None:
    created = register(api, "mover", IDLE_URL)
    secret = created["webhook"]["signing_secret"]
    new_url = "http://127.0.0.1:10/other-hook"
    put = api.ok("PUT", f"/agents/{created['id']}/webhook", json={"url": new_url})
    assert put["url"] == new_url
    assert put["signing_secret"] == secret
    read = api.ok("GET", f"/agents/{created['id']}/webhook")
    assert (read["url"], read["signing_secret"]) == (new_url, secret)
    assert agent_row(api, created["id"])["webhook_url"] == new_url


def test_put_by_username_addresses_the_same_agent(api: Api) -> None:
    created = register(api, "byname")
    put = api.ok("PUT", "/agents/byname/webhook", json={"url": IDLE_URL})
    read = api.ok("GET", f"/agents/{created['id']}/webhook")
    assert read["signing_secret"] == put["signing_secret"]


def test_delete_webhook_is_204_and_discards_the_secret(api: Api) -> None:
    created = register(api, "quitter", IDLE_URL)
    old_secret = created["webhook"]["signing_secret"]
    response = api.call("DELETE", f"/agents/{created['id']}/webhook")
    assert response.status_code == 204, response.text
    assert response.content == b""
    assert_error(api.get(f"/agents/{created['id']}/webhook"), 404, "not_found")
    assert agent_row(api, created["id"])["webhook_url"] is None
    again = api.ok("PUT", f"/agents/{created['id']}/webhook", json={"url": IDLE_URL})
    assert_secret(again["signing_secret"])
    assert again["signing_secret"] != old_secret
    assert api.ok("GET", f"/agents/{created['id']}/webhook")["previous_secret_expires_at"] is None


# --- rotation ----------------------------------------------------------------------------------


def test_rotate_returns_new_secret_and_previous_expires_in_about_24_hours(api: Api) -> None:
    created = register(api, "rotor", IDLE_URL)
    old = created["webhook"]["signing_secret"]
    before = datetime.now(tz=UTC)
    rotated = api.ok("POST", f"/agents/{created['id']}/webhook/rotate")
    after = datetime.now(tz=UTC)
    assert rotated["url"] == IDLE_URL
    assert_secret(rotated["signing_secret"])
    assert rotated["signing_secret"] != old
    expires = parse_time(rotated["previous_secret_expires_at"])
    slack = timedelta(minutes=1)
    assert before + ROTATION_OVERLAP - slack <= expires <= after + ROTATION_OVERLAP + slack
    read = api.ok("GET", f"/agents/{created['id']}/webhook")
    assert read["signing_secret"] == rotated["signing_secret"]
    assert parse_time(read["previous_secret_expires_at"]) == expires


def test_rotate_is_404_when_agent_has_no_webhook(api: Api) -> None:
    created = register(api, "unhooked")
    assert_error(api.post(f"/agents/{created['id']}/webhook/rotate"), 404, "not_found")
    assert_error(api.get(f"/agents/{created['id']}/webhook"), 404, "not_found")


# --- the agent itself: /v1/me/webhook ----------------------------------------------------------


def test_agent_manages_its_own_webhook_under_me(api: Api) -> None:
    created = register(api, "selfie")
    me = as_agent(api, created)
    assert_error(me.get("/me/webhook"), 404, "not_found")
    assert_error(me.post("/me/webhook/rotate"), 404, "not_found")

    put = me.ok("PUT", "/me/webhook", json={"url": IDLE_URL})
    assert put["url"] == IDLE_URL
    assert_secret(put["signing_secret"])
    read = me.ok("GET", "/me/webhook")
    assert read == {**put, "previous_secret_expires_at": None}
    # The operator sees the same webhook.
    assert api.ok("GET", f"/agents/{created['id']}/webhook") == read

    changed = me.ok("PUT", "/me/webhook", json={"url": "http://127.0.0.1:10/moved"})
    assert changed["signing_secret"] == put["signing_secret"]

    rotated = me.ok("POST", "/me/webhook/rotate")
    assert rotated["signing_secret"] not in (put["signing_secret"], None)
    expires = parse_time(rotated["previous_secret_expires_at"])
    assert abs(expires - (datetime.now(tz=UTC) + ROTATION_OVERLAP)) < timedelta(minutes=1)
    assert (
        api.ok("GET", f"/agents/{created['id']}/webhook")["signing_secret"]
        == (rotated["signing_secret"])
    )

    response = me.call("DELETE", "/me/webhook")
    assert response.status_code == 204, response.text
    assert_error(me.get("/me/webhook"), 404, "not_found")
    readded = me.ok("PUT", "/me/webhook", json={"url": IDLE_URL})
    assert readded["signing_secret"] not in (put["signing_secret"], rotated["signing_secret"])


def test_me_shows_webhook_url_but_never_the_secret(api: Api) -> None:
    created = register(api, "private-eye", IDLE_URL)
    secret = created["webhook"]["signing_secret"]
    me = as_agent(api, created)
    response = me.get("/me")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["webhook_url"] == IDLE_URL
    assert secret not in response.text
    assert "whsec_" not in response.text
    assert not [k for k in body if "secret" in k.lower()]
    # Nor does the operator's agent listing carry it.
    listing = api.get("/agents")
    assert secret not in listing.text and "whsec_" not in listing.text


def test_me_webhook_url_is_null_without_webhook(api: Api) -> None:
    me = as_agent(api, register(api, "nohook"))
    assert me.ok("GET", "/me")["webhook_url"] is None


# --- who may call what -------------------------------------------------------------------------


def test_agent_calling_agents_webhook_routes_is_forbidden(api: Api) -> None:
    created = register(api, "nosy", IDLE_URL)
    other = register(api, "victim", IDLE_URL)
    agent = as_agent(api, created)
    for target in (created["id"], other["id"]):
        path = f"/agents/{target}/webhook"
        assert_error(agent.call("PUT", path, json={"url": IDLE_URL + "x"}), 403, "forbidden")
        assert_error(agent.get(path), 403, "forbidden")
        assert_error(agent.call("DELETE", path), 403, "forbidden")
        assert_error(agent.post(path + "/rotate"), 403, "forbidden")
    for target, before in ((created, created["webhook"]), (other, other["webhook"])):
        read = api.ok("GET", f"/agents/{target['id']}/webhook")
        assert (read["url"], read["signing_secret"]) == (before["url"], before["signing_secret"])
        assert read["previous_secret_expires_at"] is None


def test_operator_calling_me_webhook_is_forbidden(api: Api) -> None:
    assert_error(api.call("PUT", "/me/webhook", json={"url": IDLE_URL}), 403, "forbidden")
    assert_error(api.get("/me/webhook"), 403, "forbidden")
    assert_error(api.call("DELETE", "/me/webhook"), 403, "forbidden")
    assert_error(api.post("/me/webhook/rotate"), 403, "forbidden")


def test_other_workspace_agent_id_is_not_found(api: Api, other_api: Api) -> None:
    foreign = register(other_api, "foreigner", IDLE_URL)
    path = f"/agents/{foreign['id']}/webhook"
    assert_error(api.call("PUT", path, json={"url": IDLE_URL + "x"}), 404, "not_found")
    assert_error(api.get(path), 404, "not_found")
    assert_error(api.call("DELETE", path), 404, "not_found")
    assert_error(api.post(path + "/rotate"), 404, "not_found")
    assert_error(api.get("/agents/foreigner/webhook"), 404, "not_found")
    read = other_api.ok("GET", path)
    assert read == {**foreign["webhook"], "previous_secret_expires_at": None}


def test_unknown_agent_webhook_is_not_found(api: Api) -> None:
    path = "/agents/ag_00000000000000000000000000/webhook"
    assert_error(api.call("PUT", path, json={"url": IDLE_URL}), 404, "not_found")
    assert_error(api.get(path), 404, "not_found")
    assert_error(api.post(path + "/rotate"), 404, "not_found")


# --- the URL guard at registration -------------------------------------------------------------


@PRIVATE_BLOCKED
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
    ],
)
def test_private_webhook_url_at_registration_is_rejected_and_agent_not_created(
    api: Api, url: str
) -> None:
    response = api.post("/agents", json={"name": "blocked", "webhook_url": url})
    error = assert_error(response, 422, "webhook_url_rejected")
    assert error["field"] == "webhook_url"
    assert "INBOTS_WEBHOOK_ALLOW_PRIVATE" in error["message"]
    names = [a["username"] for a in api.ok("GET", "/agents")["items"]]
    assert "blocked" not in names
    # The name was not taken by a half-created agent.
    assert register(api, "blocked")["webhook"] is None


@PRIVATE_BLOCKED
def test_private_webhook_url_on_put_is_rejected_and_existing_webhook_unchanged(api: Api) -> None:
    created = register(api, "guarded", PUBLIC_URL)  # a public target is fine
    before = api.ok("GET", f"/agents/{created['id']}/webhook")
    assert before["url"] == PUBLIC_URL
    for url in ("http://192.168.1.1/hook", "http://127.0.0.1:8000/hook", "http://[fc00::1]/"):
        response = api.call("PUT", f"/agents/{created['id']}/webhook", json={"url": url})
        error = assert_error(response, 422, "webhook_url_rejected")
        assert error["field"] == "url"
        assert "INBOTS_WEBHOOK_ALLOW_PRIVATE" in error["message"]
    assert api.ok("GET", f"/agents/{created['id']}/webhook") == before
    assert agent_row(api, created["id"])["webhook_url"] == PUBLIC_URL


@PRIVATE_BLOCKED
def test_private_webhook_url_on_put_for_agent_without_webhook_stores_nothing(api: Api) -> None:
    created = register(api, "fresh")
    response = api.call("PUT", f"/agents/{created['id']}/webhook", json={"url": "http://10.0.0.1/"})
    assert_error(response, 422, "webhook_url_rejected")
    assert_error(api.get(f"/agents/{created['id']}/webhook"), 404, "not_found")
    assert agent_row(api, created["id"])["webhook_url"] is None


@PRIVATE_BLOCKED
def test_private_webhook_url_on_me_put_is_rejected(api: Api) -> None:
    created = register(api, "selfguard", PUBLIC_URL)
    me = as_agent(api, created)
    response = me.call("PUT", "/me/webhook", json={"url": "http://127.0.0.1:8000/hook"})
    error = assert_error(response, 422, "webhook_url_rejected")
    assert error["field"] == "url"
    assert "INBOTS_WEBHOOK_ALLOW_PRIVATE" in error["message"]
    assert me.ok("GET", "/me/webhook")["url"] == PUBLIC_URL


BAD_SHAPE = [
    pytest.param("ftp://127.0.0.1/hook", id="ftp"),
    pytest.param("file:///etc/passwd", id="file"),
    pytest.param("javascript:alert(1)", id="javascript"),
    pytest.param("127.0.0.1:8000/hook", id="no-scheme"),
    pytest.param("http://user:pass@127.0.0.1/hook", id="user-and-password"),
    pytest.param("http://user@127.0.0.1/hook", id="user-only"),
    pytest.param("http://127.0.0.1/" + "a" * 2100, id="too-long"),
    pytest.param("http://127.0.0.1:0/hook", id="port-0"),
]


@pytest.mark.parametrize("url", BAD_SHAPE)
def test_bad_shape_webhook_url_is_rejected_even_with_private_allowed(api: Api, url: str) -> None:
    error = assert_error(
        api.post("/agents", json={"name": "shapely", "webhook_url": url}),
        422,
        "webhook_url_rejected",
    )
    assert error["field"] == "webhook_url"
    assert "shapely" not in [a["username"] for a in api.ok("GET", "/agents")["items"]]
    created = register(api, "shapely", IDLE_URL)
    error = assert_error(
        api.call("PUT", f"/agents/{created['id']}/webhook", json={"url": url}),
        422,
        "webhook_url_rejected",
    )
    assert error["field"] == "url"
    assert api.ok("GET", f"/agents/{created['id']}/webhook")["url"] == IDLE_URL


# --- redeliver ---------------------------------------------------------------------------------


def test_redeliver_publishes_again_with_the_same_webhook_id(api: Api) -> None:
    with receiver(always(204)) as hook:
        created = register(api, "again", hook.url)
        secret = created["webhook"]["signing_secret"]
        delivery_id = send_to(api, "again")
        (first,) = hook.wait_for(1)
        notified = wait_for(lambda: api.delivery(delivery_id), lambda d: d["notified_at"])
        assert notified["publish_count"] == 1
        response = api.post(f"/deliveries/{delivery_id}/redeliver")
        assert response.status_code == 202, response.text
        assert response.json()["id"] == delivery_id
        assert response.json()["publish_count"] == 2
        _, second = hook.wait_for(2)
        detail = wait_for(lambda: api.delivery(delivery_id), lambda d: len(d["attempts"]) >= 2)
    assert "." not in delivery_id
    assert lowered(first)["webhook-id"] == lowered(second)["webhook-id"] == delivery_id
    assert standardwebhooks.Webhook(secret).verify(second.body, lowered(second))["delivery_id"] == (
        delivery_id
    )
    assert second.json() == first.json()
    assert detail["publish_count"] == 2
    assert detail["notified_at"] == notified["notified_at"]  # earlier stamps stay
    assert [(a["publish"], a["trigger"], a["reason"]) for a in detail["attempts"]] == [
        (1, "publish", "ok"),
        (2, "redeliver", "ok"),
    ]


def test_redeliver_of_failed_delivery_gives_new_successful_attempt(api: Api) -> None:
    with receiver(always(410, b"gone")) as gone, receiver(always(200)) as healthy:
        created = register(api, "phoenix", gone.url)
        secret = created["webhook"]["signing_secret"]
        delivery_id = send_to(api, "phoenix")
        failed = wait_for(lambda: api.delivery(delivery_id), lambda d: d["failed_at"])
        assert failed["state"] == "failed"
        assert "410" in failed["failure_reason"]
        time.sleep(0.5)  # a 410 is not retried
        # One POST per recorded attempt, the last one answered 410. (On a loaded machine an
        # attempt before it may have timed out and been retried: that one is not a 410.)
        gone_request = gone.wait_for(1)[-1]
        assert len(gone.requests) == len(failed["attempts"]), failed["attempts"]

        api.ok("PUT", f"/agents/{created['id']}/webhook", json={"url": healthy.url})
        response = api.post(f"/deliveries/{delivery_id}/redeliver")
        assert response.status_code == 202, response.text
        assert response.json()["publish_count"] == failed["publish_count"] + 1
        (healthy_request,) = healthy.wait_for(1)
        detail = wait_for(lambda: api.delivery(delivery_id), lambda d: d["notified_at"])
    assert detail["notified_at"]
    assert detail["failed_at"] == failed["failed_at"]  # earlier stamps stay
    assert detail["failure_reason"] == failed["failure_reason"]
    assert lowered(healthy_request)["webhook-id"] == lowered(gone_request)["webhook-id"]
    assert standardwebhooks.Webhook(secret).verify(healthy_request.body, lowered(healthy_request))
    attempts = [
        (a["publish"], a["trigger"], a["reason"], a["status_code"], a["url"])
        for a in detail["attempts"]
    ]
    timed_out = [a for a in attempts[:-2] if a[2] == "timeout"]  # see above
    assert attempts == [
        *timed_out,
        (1, "publish", "gone", 410, gone.url),
        (2, "redeliver", "ok", 200, healthy.url),
    ]


def dashboard_page(api: Api, path: str) -> str:
    """A dashboard page as the signed-in operator sees it (its HTML)."""
    with httpx.Client(base_url=api.base_url, timeout=30) as page:
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.get("/login").text)
        assert csrf
        signed = page.post("/login", data={"token": api.token, "csrf": csrf.group(1)})
        assert signed.status_code == 303, signed.text
        return page.get(path).text


def test_a_failed_delivery_a_redeliver_notifies_is_no_longer_failed_anywhere(api: Api) -> None:
    """Attempts 1-4 answer 500 (failed); the operator fixes the receiver (a new URL) and
    redelivers: attempt 5 answers 204. The state, the counts, the failed listing, the overview
    and the webhook's health follow that latest attempt."""
    with receiver(always(500)) as broken, receiver(always(204)) as mended:
        created = register(api, "mended", broken.url)
        sender = api.agent("sender")
        thread = sender.open_thread("Mended", ["mended"])
        delivery_id = sender.send(thread["id"], "first")["deliveries"][0]["id"]
        failed = wait_for(lambda: api.delivery(delivery_id), lambda d: d["failed_at"])
        assert failed["state"] == "failed"
        assert api.ok("GET", "/stats")["deliveries"]["failed"] == 1
        assert 'data-health="failing"' in dashboard_page(api, "/agents")
        api.ok("PUT", f"/agents/{created['id']}/webhook", json={"url": mended.url})
        api.ok("POST", f"/deliveries/{delivery_id}/redeliver", 202)
        detail = wait_for(lambda: api.delivery(delivery_id), lambda d: d["notified_at"])
        later = [sender.send(thread["id"], "more")["deliveries"][0]["id"] for _ in range(2)]
        mended.wait_for(3)
        for other in later:
            wait_for(lambda: api.delivery(other), lambda d: d["notified_at"])  # noqa: B023
    assert [(a["number"], a["reason"]) for a in detail["attempts"]][-1] == (5, "ok")
    assert detail["failed_at"] == failed["failed_at"]  # the stamp stays; the state moves on
    assert detail["state"] == "notified"
    counts = api.ok("GET", "/stats")["deliveries"]
    assert (counts["failed"], counts["notified"]) == (0, 3)
    assert api.ok("GET", "/deliveries", params={"state": "failed"})["items"] == []
    overview = dashboard_page(api, "/")
    assert delivery_id not in overview
    assert "No failed deliveries." in overview
    agents = dashboard_page(api, "/agents")
    row = agents[agents.index('data-agent="mended"') :]
    row = row[: row.index("</tr>")]
    assert "3 ok · 0 failed of last 3" in row
    assert 'data-health="healthy"' in row


def test_redeliver_for_agent_without_webhook_is_conflict(api: Api) -> None:
    register(api, "pollster")
    delivery_id = send_to(api, "pollster")
    before = api.delivery(delivery_id)
    assert_error(api.post(f"/deliveries/{delivery_id}/redeliver"), 409, "conflict")
    after = api.delivery(delivery_id)
    assert after["publish_count"] == before["publish_count"]
    assert after["attempts"] == []


def test_redeliver_after_webhook_removed_is_conflict(api: Api) -> None:
    with receiver(always(204)) as hook:
        created = register(api, "leaver", hook.url)
        delivery_id = send_to(api, "leaver")
        hook.wait_for(1)
        wait_for(lambda: api.delivery(delivery_id), lambda d: d["notified_at"])
        api.ok("DELETE", f"/agents/{created['id']}/webhook", 204)
        assert_error(api.post(f"/deliveries/{delivery_id}/redeliver"), 409, "conflict")
        time.sleep(0.3)
        assert len(hook.requests) == 1


def test_redeliver_in_a_closed_thread_is_conflict(api: Api) -> None:
    """A closed thread's mail is never notified: a redelivery would be published and skipped
    with no trace, so it is refused and nothing changes."""
    with receiver(always(204)) as hook:
        register(api, "closer", hook.url)
        sender = api.agent("sender")
        thread = sender.open_thread("Short-lived", ["closer"])["id"]
        delivery_id = sender.send(thread, "hello")["deliveries"][0]["id"]
        # Notified first, so no attempt is still in flight (or due) when the thread closes.
        wait_for(lambda: api.delivery(delivery_id), lambda d: d["notified_at"])
        api.ok("POST", f"/threads/{thread}/close")
        before = api.delivery(delivery_id)
        error = assert_error(api.post(f"/deliveries/{delivery_id}/redeliver"), 409, "conflict")
        assert "closed thread" in error["message"] and thread in error["message"]
        after = api.delivery(delivery_id)
        assert after["publish_count"] == before["publish_count"]
        assert after["attempts"] == before["attempts"]


def test_agent_calling_redeliver_is_forbidden(api: Api) -> None:
    with receiver(always(204)) as hook:
        created = register(api, "recipient", hook.url)
        delivery_id = send_to(api, "recipient")
        hook.wait_for(1)
        before = wait_for(lambda: api.delivery(delivery_id), lambda d: d["notified_at"])
        agent = as_agent(api, created)
        assert_error(agent.post(f"/deliveries/{delivery_id}/redeliver"), 403, "forbidden")
        time.sleep(0.3)
        assert len(hook.requests) == 1
    assert api.delivery(delivery_id)["publish_count"] == before["publish_count"]


def test_redeliver_unknown_delivery_is_not_found(api: Api) -> None:
    assert_error(api.post("/deliveries/dlv_00000000000000000000000000/redeliver"), 404, "not_found")
    assert_error(api.post("/deliveries/nonsense/redeliver"), 404, "not_found")


def test_redeliver_other_workspaces_delivery_is_not_found(api: Api, other_api: Api) -> None:
    register(other_api, "elsewhere", IDLE_URL)
    delivery_id = send_to(other_api, "elsewhere")
    assert_error(api.post(f"/deliveries/{delivery_id}/redeliver"), 404, "not_found")


# --- signatures end to end ---------------------------------------------------------------------


def test_rotation_overlap_signs_with_both_old_and_new_secret(api: Api) -> None:
    with receiver(always(204)) as hook:
        created = register(api, "switcher", hook.url)
        old = created["webhook"]["signing_secret"]
        new = api.ok("POST", f"/agents/{created['id']}/webhook/rotate")["signing_secret"]
        assert new != old
        delivery_id = send_to(api, "switcher")
        (request,) = hook.wait_for(1)
    headers = lowered(request)
    signatures = headers["webhook-signature"].split(" ")
    assert len(signatures) == 2 and all(s.startswith("v1,") for s in signatures)
    for secret in (old, new):
        payload = standardwebhooks.Webhook(secret).verify(request.body, headers)
        assert payload["delivery_id"] == delivery_id
        SvixWebhook(secret).verify(request.body, headers)
        assert verify(request.body, headers, secret)["delivery_id"] == delivery_id
    # The new secret's signature comes first.
    first_only = {**headers, "webhook-signature": signatures[0]}
    assert standardwebhooks.Webhook(new).verify(request.body, first_only)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(old).verify(request.body, first_only)


def test_notification_after_delete_and_readd_is_signed_with_the_new_secret_only(api: Api) -> None:
    with receiver(always(204)) as hook:
        created = register(api, "reborn", hook.url)
        first = created["webhook"]["signing_secret"]
        api.ok("POST", f"/agents/{created['id']}/webhook/rotate")
        api.ok("DELETE", f"/agents/{created['id']}/webhook", 204)
        fresh = api.ok("PUT", f"/agents/{created['id']}/webhook", json={"url": hook.url})
        fresh_secret = fresh["signing_secret"]
        send_to(api, "reborn")
        (request,) = hook.wait_for(1)
    headers = lowered(request)
    assert len(headers["webhook-signature"].split(" ")) == 1
    assert verify(request.body, headers, fresh_secret)
    with pytest.raises(BadSignature):
        verify(request.body, headers, first)


def test_notification_is_signed_with_the_secret_the_api_returned(api: Api) -> None:
    with receiver(always(204)) as hook:
        created = register(api, "signed")
        me = as_agent(api, created)
        secret = me.ok("PUT", "/me/webhook", json={"url": hook.url})["signing_secret"]
        delivery_id = send_to(api, "signed")
        (request,) = hook.wait_for(1)
    headers = lowered(request)
    assert headers["webhook-id"] == delivery_id
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 60
    payload = standardwebhooks.Webhook(secret).verify(request.body, headers)
    assert payload["delivery_id"] == delivery_id
    assert payload["recipient"] == "signed"
    SvixWebhook(secret).verify(
        request.body, {k.replace("webhook-", "svix-"): v for k, v in headers.items()}
    )
