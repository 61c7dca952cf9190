"""Bad input: every rejection is the error envelope with a stable code, never a 500, and changes
nothing that was stored."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy import func, select

from inbots.db.engine import Database
from inbots.deliveries.schemas import AckRequest
from inbots.kit.schema import refusal
from inbots.messages.schemas import MessageCreate
from inbots.models.deliveries import Delivery
from inbots.models.messages import Message
from inbots.models.threads import Participant, Thread
from tests.helpers import Api, Caller, assert_error

JSON = {"Content-Type": "application/json"}
LIMIT = 64 * 1024


def assert_envelope(response: httpx.Response, label: object = "") -> dict[str, Any]:
    """The body of a non-2xx answer: ``{"error": {"code", "message", "field"?}}``."""
    try:
        body = response.json()
    except ValueError:
        raise AssertionError((label, response.status_code, response.text[:300])) from None
    assert isinstance(body, dict) and "error" in body, (label, body)
    error = body["error"]
    assert isinstance(error, dict), (label, body)
    assert set(error) <= {"code", "message", "field"}, (label, body)
    assert isinstance(error.get("code"), str) and error["code"], (label, body)
    assert error["code"] == error["code"].lower() and " " not in error["code"], (label, body)
    assert isinstance(error.get("message"), str) and error["message"].strip(), (label, body)
    return error  # type: ignore[no-any-return]


@dataclass
class Scene:
    alpha: Caller
    beta: Caller
    thread_id: str
    message_id: str
    delivery_id: str


@pytest.fixture
def scene(api: Api) -> Scene:
    alpha = api.agent("alpha")
    beta = api.agent("beta")
    thread = alpha.open_thread("A task", ["beta"])
    sent = alpha.send(thread["id"], "first message")
    return Scene(alpha, beta, thread["id"], sent["message"]["id"], sent["deliveries"][0]["id"])


def counts(database: Database) -> dict[str, int]:
    with database.engine.connect() as conn:
        return {
            model.__tablename__: conn.execute(select(func.count()).select_from(model)).scalar_one()
            for model in (Message, Delivery, Thread, Participant)
        }


# --- malformed JSON, wrong types, missing fields ---------------------------------------------


def test_malformed_json_is_422_invalid_json(api: Api, scene: Scene) -> None:
    calls = [
        (scene.alpha, f"/threads/{scene.thread_id}/messages"),
        (scene.alpha, "/threads"),
        (scene.alpha, "/acks"),
        (scene.alpha, f"/threads/{scene.thread_id}/participants"),
        (api, "/agents"),
    ]
    for caller, path in calls:
        for raw in (b"{not json", b'{"body": "unterminated', b"{'body': 'single quotes'}", b"{,}"):
            response = caller.post(path, content=raw, headers=JSON)
            error = assert_error(response, 422, "invalid_json", label=(path, raw))
            assert "not valid JSON" in error["message"], (path, raw, error)
            assert "character" in error["message"], (path, raw, error)  # says where


def test_send_with_body_of_wrong_type_names_the_field(scene: Scene) -> None:
    for value in (5, True, ["x"], {"text": "x"}, 1.5):
        response = scene.alpha.post(f"/threads/{scene.thread_id}/messages", json={"body": value})
        error = assert_error(response, 422, "validation_error", field="body", label=value)
        assert "body" in error["message"], error


def test_open_thread_with_participants_of_wrong_type_names_the_field(scene: Scene) -> None:
    for value in ("x", 5, {"beta": True}, [5], [None]):
        response = scene.alpha.post("/threads", json={"title": "t", "participants": value})
        error = assert_error(response, 422, "validation_error", field="participants", label=value)
        assert "participants" in error["message"], error


def test_open_thread_with_title_of_wrong_type_names_the_field(scene: Scene) -> None:
    for value in (5, None, ["t"]):
        response = scene.alpha.post("/threads", json={"title": value, "participants": ["beta"]})
        assert_error(response, 422, "validation_error", field="title", label=value)


def test_ack_with_ids_of_wrong_type_names_the_field(scene: Scene) -> None:
    for value in ("x", 5, None, {"id": "x"}, [5], [["x"]]):
        response = scene.beta.post("/acks", json={"ids": value})
        error = assert_error(response, 422, "validation_error", field="ids", label=value)
        assert "ids" in error["message"], error


def test_other_wrongly_typed_fields_are_named(api: Api, scene: Scene) -> None:
    send = f"/threads/{scene.thread_id}/messages"
    cases: list[tuple[Caller, str, dict[str, Any], str]] = [
        (scene.alpha, send, {"body": "x", "summary": 5}, "summary"),
        (scene.alpha, send, {"body": "x", "kind": 5}, "kind"),
        (scene.alpha, send, {"body": "x", "kind": "shout"}, "kind"),
        (scene.alpha, send, {"body": "x", "reply_to": 5}, "reply_to"),
        (scene.alpha, "/threads", {"title": "t", "goal": 5, "participants": []}, "goal"),
        (scene.alpha, f"/threads/{scene.thread_id}/participants", {"username": 5}, "username"),
        (scene.beta, "/acks", {"ids": [scene.delivery_id], "outcome": 5}, "outcome"),
        (scene.beta, "/acks", {"ids": [scene.delivery_id], "outcome": "maybe"}, "outcome"),
        (scene.beta, "/acks", {"ids": [scene.delivery_id], "note": 5}, "note"),
        (api, "/agents", {"name": "gamma", "description": 5}, "description"),
    ]
    for caller, path, body, field in cases:
        response = caller.post(path, json=body)
        assert_error(response, 422, "validation_error", field=field, label=(path, body))


def test_missing_required_field_names_it(api: Api, scene: Scene) -> None:
    cases: list[tuple[Caller, str, dict[str, Any], str]] = [
        (scene.alpha, f"/threads/{scene.thread_id}/messages", {"summary": "no body"}, "body"),
        (scene.alpha, "/threads", {"participants": ["beta"]}, "title"),
        (scene.alpha, f"/threads/{scene.thread_id}/participants", {}, "username"),
        (scene.beta, "/acks", {"outcome": "done"}, "ids"),
        (api, "/agents", {"description": "nameless"}, "name"),
    ]
    for caller, path, body, field in cases:
        response = caller.post(path, json=body)
        error = assert_error(response, 422, "validation_error", field=field, label=(path, body))
        assert field in error["message"], (path, error)


def test_a_refused_field_is_worded_by_the_one_translator(scene: Scene) -> None:
    """HTTP says what pydantic refused as ``kit.schema.refusal`` words it (the MCP tools and the
    dashboard's forms call it too): the path, then pydantic's words; or "is required"."""
    send = f"/threads/{scene.thread_id}/messages"
    for body, sentence in (
        ({"body": 5}, "body: input should be a valid string."),
        ({"summary": "no body"}, "body is required."),
        ({"body": "x", "priority": ["urgent"]}, "priority: input should be a valid string."),
    ):
        try:
            MessageCreate.model_validate(body)
        except ValidationError as exc:
            refused = refusal(exc.errors()[0])
        assert (refused.message, refused.field) == (sentence, sentence.split(":")[0].split()[0])
        error = assert_error(scene.alpha.post(send, json=body), 422, "validation_error")
        assert (error["message"], error["field"]) == (refused.message, refused.field)
    try:
        AckRequest.model_validate({"ids": ["dlv_1", 5]})
    except ValidationError as exc:
        assert refusal(exc.errors()[0]).message == "ids.1: input should be a valid string."


def test_missing_request_body_is_422(scene: Scene) -> None:
    response = scene.alpha.post(f"/threads/{scene.thread_id}/messages")
    assert_error(response, 422, "validation_error")
    response = scene.alpha.post(f"/threads/{scene.thread_id}/messages", content=b"", headers=JSON)
    assert_error(response, 422, "validation_error")


def test_json_that_is_not_an_object_is_422(scene: Scene) -> None:
    for value in ([], [{"body": "x"}], "body", 5, None, True):
        response = scene.alpha.post(f"/threads/{scene.thread_id}/messages", json=value)
        assert_error(response, 422, "validation_error", label=value)


def test_a_body_that_is_not_utf8_is_422_invalid_json(api: Api, scene: Scene) -> None:
    calls = [
        (scene.alpha, f"/threads/{scene.thread_id}/messages"),
        (scene.alpha, "/threads"),
        (scene.beta, "/acks"),
        (api, "/agents"),
    ]
    for caller, path in calls:
        for raw in (b'{"body": "caf\xe9"}', b'{"body": "\xff"}', b'{"name": "\xc3"}'):
            response = caller.post(path, content=raw, headers=JSON)
            error = assert_error(response, 422, "invalid_json", label=(path, raw))
            assert "not UTF-8" in error["message"] and "send JSON" in error["message"], error
        # A byte-order mark makes the parser read UTF-16: still not JSON, still the envelope.
        assert_error(caller.post(path, content=b"\xff\xfe{}", headers=JSON), 422, "invalid_json")


def test_deeply_nested_json_is_422_invalid_json(api: Api, scene: Scene) -> None:
    send = f"/threads/{scene.thread_id}/messages"
    for raw in (
        b"[" * 10_000 + b"]" * 10_000,
        b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
        b'{"body": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    ):
        for caller, path in ((scene.alpha, send), (api, "/agents")):
            response = caller.post(path, content=raw, headers=JSON)
            error = assert_error(response, 422, "invalid_json", label=(path, raw[:12]))
            assert "nests" in error["message"] and "flatter" in error["message"], error
    scene.alpha.send(scene.thread_id, "still fine")  # nothing broke


def test_a_del_character_in_idempotency_key_gets_the_envelope(scene: Scene) -> None:
    """The HTTP parser refuses a DEL in a header value before the app runs; the answer is still
    the envelope, not the server's plain text."""
    response = scene.alpha.post(
        f"/threads/{scene.thread_id}/messages",
        json={"body": "x"},
        headers={"Idempotency-Key": "abc\x7fdef"},
    )
    error = assert_error(response, 400, "bad_request")
    assert "header" in error["message"]


# --- oversize bodies ------------------------------------------------------------------------


def oversize_send() -> bytes:
    return json.dumps({"body": "x" * (LIMIT + 100)}).encode()


def test_body_over_64_kib_with_content_length_is_413(scene: Scene, database: Database) -> None:
    before = counts(database)
    payload = oversize_send()
    response = scene.alpha.post(
        f"/threads/{scene.thread_id}/messages",
        content=payload,
        headers={**JSON, "Content-Length": str(len(payload))},
    )
    assert_error(response, 413, "payload_too_large")
    assert counts(database) == before


def test_body_over_64_kib_streamed_without_content_length_is_413(
    scene: Scene, database: Database
) -> None:
    before = counts(database)
    payload = oversize_send()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(payload), 8192):
            yield payload[start : start + 8192]

    request = scene.alpha.client.build_request(
        "POST",
        f"/v1/threads/{scene.thread_id}/messages",
        content=chunks(),
        headers={**scene.alpha.headers, **JSON},
    )
    assert "content-length" not in request.headers
    assert request.headers.get("transfer-encoding") == "chunked"
    response = scene.alpha.client.send(request)
    assert_error(response, 413, "payload_too_large")
    assert counts(database) == before


def test_body_under_64_kib_reaches_validation(scene: Scene) -> None:
    """Just under the cap the request is read and judged on its content (here: too long a body)."""
    payload = json.dumps({"body": "x" * (LIMIT - 1000), "summary": "s"}).encode()
    assert len(payload) < LIMIT
    response = scene.alpha.post(
        f"/threads/{scene.thread_id}/messages", content=payload, headers=JSON
    )
    assert_error(response, 422, "validation_error", field="body")


def test_oversize_body_is_413_on_every_endpoint(api: Api, scene: Scene) -> None:
    blob = json.dumps({"title": "t" * (LIMIT + 1), "participants": []}).encode()
    for caller, path in (
        (scene.alpha, "/threads"),
        (scene.beta, "/acks"),
        (api, "/agents"),
        (scene.alpha, f"/threads/{scene.thread_id}/participants"),
    ):
        response = caller.post(path, content=blob, headers=JSON)
        assert_error(response, 413, "payload_too_large", label=path)


# --- unknown paths and methods ----------------------------------------------------------------


def test_unknown_path_is_404_envelope(api: Api, raw: httpx.Client) -> None:
    for path in ("/v1/nope", "/v1/agents/alpha/nope", "/v2/agents", "/nope"):
        response = raw.get(api.base_url + path, headers=api.headers)
        assert_error(response, 404, "not_found", label=path)
        assert response.headers["content-type"].startswith("application/json")


def test_wrong_method_is_405_envelope(api: Api, scene: Scene) -> None:
    for method, path in (
        ("DELETE", "/agents"),
        ("PUT", "/threads"),
        ("PATCH", f"/threads/{scene.thread_id}"),
        ("GET", "/acks"),
        ("DELETE", f"/threads/{scene.thread_id}/messages"),
    ):
        response = api.call(method, path)
        assert response.status_code == 405, (method, path, response.text)
        assert_envelope(response, (method, path))
        assert "allow" in {k.lower() for k in response.headers}


def test_unknown_thread_id_is_404(scene: Scene) -> None:
    response = scene.alpha.post("/threads/th_doesnotexist/messages", json={"body": "x"})
    assert_error(response, 404, "not_found")


def test_every_not_found_names_the_ids_shape_and_the_call_that_lists_them(
    api: Api, scene: Scene
) -> None:
    """agents-and-governance.md §4: a not-found names the id's expected shape and the call that
    lists them, for each kind of id (an event's too)."""
    cases = [
        (scene.alpha, "/threads/nope", "th_…", "GET /v1/threads"),
        (scene.alpha, "/messages/nope", "msg_…", "GET /v1/inbox"),
        (api, "/deliveries/nope", "dlv_…", "GET /v1/deliveries"),
        (api, "/agents/nope", "ag_…", "GET /v1/agents"),
        (api, "/events/nope", "evt_…", "GET /v1/events"),
    ]
    for caller, path, shape, listing in cases:
        error = assert_error(caller.call("GET", path), 404, "not_found", label=path)
        assert shape in error["message"] and listing in error["message"], (path, error)
    held = api.call("POST", "/approvals/nope/approve", json={})
    error = assert_error(held, 404, "not_found")
    assert "msg_…" in error["message"] and "GET /v1/approvals" in error["message"], error


def _forged(text: str) -> str:
    """A cursor in the wire format (unpadded URL-safe base64) of any text."""
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "moment", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-05:00"], ids=["year0", "year10000"]
)
def test_a_time_outside_the_years_once_in_utc_is_422_not_a_crash(
    api: Api, scene: Scene, moment: str
) -> None:
    """A well-formed RFC 3339 time whose UTC falls before year 1 or after 9999 is refused naming
    the field, everywhere a time is read from the caller (and a forged thread-list cursor
    carrying one is not one the server gave out)."""
    thread = scene.thread_id
    calls = [
        ("/inbox", {"since": moment}, "since"),
        ("/search", {"q": "first", "since": moment}, "since"),
        ("/search", {"q": "first", "until": moment}, "until"),
        (f"/threads/{thread}/messages", {"since": moment}, "since"),
        ("/threads", {"cursor": _forged(f"{moment}|{thread}")}, "cursor"),
    ]
    for path, params, field in calls:
        response = scene.beta.get(path, params=params)
        error = assert_error(response, 422, "validation_error", label=(path, params))
        assert error["field"] == field, (path, error)
    assert scene.beta.ok("GET", "/inbox")["waiting"] == 1  # and the caller can go on


def test_every_time_the_caller_gives_is_read_the_same_way(api: Api, scene: Scene) -> None:
    """The inbox, search and thread history read a time alike: RFC 3339 with ``Z`` or ``z``
    (surrounding spaces ignored); a time without a zone is refused saying so, and text that is
    no time is refused naming the field."""
    thread = scene.thread_id
    sites = [
        ("/inbox", {}, "since"),
        ("/search", {"q": "first"}, "since"),
        ("/search", {"q": "first"}, "until"),
        (f"/threads/{thread}/messages", {}, "since"),
    ]
    for path, params, field in sites:
        for moment in ("2026-11-29T18:10:00Z", "2026-11-29t18:10:00z", " 2026-11-29T18:10:00Z "):
            answer = scene.beta.get(path, params={**params, field: moment})
            assert answer.status_code == 200, (path, field, moment, answer.text)
        zoneless = scene.beta.get(path, params={**params, field: "2026-11-29T18:10:00"})
        error = assert_error(zoneless, 422, "validation_error", label=(path, field))
        assert error["field"] == field and "time zone" in error["message"], (path, error)
        garbage = scene.beta.get(path, params={**params, field: "last tuesday"})
        error = assert_error(garbage, 422, "validation_error", label=(path, field))
        assert error["field"] == field and "RFC 3339" in error["message"], (path, error)


# --- odd inputs: never a 500, always the envelope ---------------------------------------------


def fresh_call(caller: Caller, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """One request on its own connection, so one broken answer cannot spoil the next."""
    headers = {**caller.headers, "Connection": "close", **kwargs.pop("headers", {})}
    return caller.client.request(method, "/v1" + path, headers=headers, **kwargs)


def run_batch(cases: list[tuple[Caller, str, str, dict[str, Any]]]) -> None:
    problems = []
    for caller, method, path, kwargs in cases:
        label = (method, path[:80], str(kwargs)[:120])
        try:
            response = fresh_call(caller, method, path, **kwargs)
        except httpx.HTTPError as exc:
            problems.append((label, f"no answer: {type(exc).__name__}: {exc}"))
            continue
        if response.status_code >= 500:
            problems.append((label, response.status_code, response.text[:200]))
            continue
        if response.status_code >= 300:
            try:
                assert_envelope(response, label)
            except AssertionError as exc:
                problems.append((label, "not the envelope", str(exc)[:200]))
    assert not problems, f"{len(problems)} of {len(cases)} odd inputs went wrong:\n" + "\n".join(
        map(str, problems)
    )


def test_odd_json_bodies_never_give_500(api: Api, scene: Scene) -> None:
    send = f"/threads/{scene.thread_id}/messages"
    a, b = scene.alpha, scene.beta
    bodies: list[tuple[Caller, str, Any]] = [
        (a, send, {"body": "héllo wörld 👋🏽 \u202eevil\u202c ﷽ 𝕏"}),
        (a, send, {"body": "x", "summary": "📦" * 200}),
        (a, send, {"body": "x", "summary": "📦" * 201}),
        (a, send, {"body": None}),
        (a, send, {"body": ""}),
        (a, send, {"body": " \n\t "}),
        (a, send, {"body": "x", "summary": None, "kind": None, "reply_to": None}),
        (a, send, {"body": "x", "reply_to": "msg_nope"}),
        (a, send, {"body": "x", "reply_to": scene.thread_id}),
        (a, send, {"body": "x", "kind": "TASK"}),
        (a, send, {"body": "x", "summary": "line one\nline two"}),
        (a, send, {"body": "x", "unknown_field": [1, 2, 3]}),
        (a, send, {"body": {"nested": {"deeper": [None]}}}),
        (a, send, [{"body": "x"}]),
        (a, send, ["body"]),
        (a, "/threads", {"title": None, "participants": None}),
        (a, "/threads", {"title": "t", "participants": [None]}),
        (a, "/threads", {"title": "t", "participants": ["beta", "beta", "alpha"]}),
        (a, "/threads", {"title": "t" * 201, "participants": []}),
        (a, "/threads", {"title": "t", "goal": "g" * 2001, "participants": []}),
        (a, "/threads", {"title": "🧵", "participants": ["BETA"]}),
        (a, "/threads", {"title": "t", "participants": ["operator"]}),
        (a, f"/threads/{scene.thread_id}/participants", {"username": None}),
        (a, f"/threads/{scene.thread_id}/participants", {"username": "ünïcode"}),
        (b, "/acks", {"ids": []}),
        (b, "/acks", {"ids": [None]}),
        (b, "/acks", {"ids": ["x"] * 101}),
        (b, "/acks", {"ids": ["dlv_" + "z" * 5000]}),
        (b, "/acks", {"ids": ["../../etc/passwd", "%00", "msg_💥"]}),
        (b, "/acks", {"ids": [scene.delivery_id], "note": "n" * 501}),
        (b, "/acks", [scene.delivery_id]),
        (api, "/agents", {"name": None}),
        (api, "/agents", {"name": "ok-name", "description": "d" * 5000}),
        (api, "/agents", {"name": "other-name", "webhook_url": 5}),
        (api, "/agents", {"name": ["a", "b"]}),
        (api, "/agents", {"name": "x" * 10000}),
    ]
    cases = [(c, "POST", p, {"json": body}) for c, p, body in bodies]
    raw_bodies: list[tuple[Caller, str, bytes]] = [
        (a, send, b'{"body": 1e400}'),
        (a, send, b'{"body": -1e400}'),
        (a, send, b'{"body": NaN}'),
        (a, send, b'{"body": Infinity}'),
        (a, send, b'{"body": ' + b"9" * 5000 + b"}"),
        (b, "/acks", b'{"ids": [' + b"9" * 5000 + b"]}"),
        (b, "/acks", b'{"ids": [1e400]}'),
        (a, send, b'{"body": "\xff\xfe"}'),  # not UTF-8
        (a, send, b'\xef\xbb\xbf{"body": "bom"}'),
        (a, send, b'{"body": "x", "body": "duplicate key"}'),
        (a, send, b"[" * 5000 + b"]" * 5000),
        (a, send, b'{"body": ' + b"[" * 5000 + b"]" * 5000 + b"}"),
        (a, send, b"null"),
        (a, send, b"   "),
        (a, send, b'"just a string"'),
    ]
    cases += [(c, "POST", p, {"content": body, "headers": JSON}) for c, p, body in raw_bodies]
    cases += [
        (a, "POST", send, {"content": b"body=hello", "headers": {"Content-Type": "text/plain"}}),
        (
            a,
            "POST",
            send,
            {
                "content": b"body=hello",
                "headers": {"Content-Type": "application/x-www-form-urlencoded"},
            },
        ),
        (a, "POST", send, {"content": b'{"body": "x"}', "headers": {"Content-Type": "nonsense"}}),
    ]
    run_batch(cases)


ODD_IDS = (
    "x" * 5000,
    "th_" + "0" * 3000,
    "a.b",
    "..",
    "...",
    "%2e%2e",
    "a%2Fb",
    "a%2F..%2F..",
    "%25",
    "%2525",
    "a%20b",
    "%FF%FE",
    "ünïcödé",
    "💥",
    "'; DROP TABLE agents; --",
    "%27%20OR%201=1--",
    "*",
    "null",
    "-1",
    "1e400",
    "~",
    "%0A",
)


def test_odd_path_ids_never_give_500(api: Api, scene: Scene) -> None:
    a, b = scene.alpha, scene.beta
    templates: list[tuple[Caller, str, str, dict[str, Any]]] = [
        (a, "GET", "/threads/{id}", {}),
        (a, "GET", "/threads/{id}/messages", {}),
        (a, "POST", "/threads/{id}/messages", {"json": {"body": "x"}}),
        (a, "POST", "/threads/{id}/participants", {"json": {"username": "beta"}}),
        (a, "POST", "/threads/{id}/close-request", {}),
        (b, "GET", "/messages/{id}", {}),
        (b, "POST", "/deliveries/{id}/received", {}),
        (api, "GET", "/agents/{id}", {}),
        (api, "POST", "/agents/{id}/archive", {}),
        (api, "GET", "/threads/{id}", {}),
        (api, "POST", "/threads/{id}/close", {}),
        (api, "POST", "/threads/{id}/close/dismiss", {}),
        (api, "GET", "/deliveries/{id}", {}),
    ]
    cases = [
        (caller, method, template.format(id=ident), dict(kwargs))
        for caller, method, template, kwargs in templates
        for ident in ODD_IDS
    ]
    run_batch(cases)
    # None of it touched the real thread or agents.
    assert api.ok("GET", f"/threads/{scene.thread_id}")["status"] == "open"
    assert {x["status"] for x in api.ok("GET", "/agents")["items"]} == {"active"}


@pytest.mark.parametrize("settings_overrides", [{"list_default": 2, "list_max": 3}])
def test_every_list_reads_its_limit_alike_and_leniently(api: Api, scene: Scene) -> None:
    """``?limit=`` is one dependency for every list: 1 to INBOTS_LIST_MAX is the page size, and
    anything else (out of range, not a whole number) is INBOTS_LIST_DEFAULT, never an error."""
    for n in range(4):
        scene.alpha.send(scene.thread_id, f"more {n}", summary="more")
        scene.beta.send(scene.thread_id, f"back {n}", summary="back")
    lists: list[tuple[Caller, str, dict[str, str]]] = [
        (scene.beta, "/inbox", {}),
        (scene.alpha, f"/threads/{scene.thread_id}/messages", {}),
        (scene.alpha, "/outbox", {}),
        (scene.alpha, "/search", {"q": "more"}),
        (api, "/deliveries", {}),
        (api, "/threads", {}),
    ]
    api.open_thread("second", ["alpha"])
    api.open_thread("third", ["alpha"])
    for caller, path, params in lists:
        for limit, size in (("1", 1), ("3", 3), ("4", 2), ("0", 2), ("-1", 2), ("x", 2), ("", 2)):
            page = caller.ok("GET", path, params={**params, "limit": limit})
            assert len(page["items"]) == size, (path, limit, page)


def test_odd_query_parameters_never_give_500(api: Api, scene: Scene) -> None:
    a, b = scene.alpha, scene.beta
    history = f"/threads/{scene.thread_id}/messages"
    values = ("", "x" * 3000, "-1", "0", "1e400", "99999999999999999999999", "abc", "💥", "%FF")
    cases: list[tuple[Caller, str, str, dict[str, Any]]] = []
    for value in values:
        cases += [
            (api, "GET", "/deliveries", {"params": {"state": value}}),
            (api, "GET", "/deliveries", {"params": {"agent": value}}),
            (api, "GET", "/deliveries", {"params": {"thread": value}}),
            (api, "GET", "/deliveries", {"params": {"limit": value}}),
            (api, "GET", "/deliveries", {"params": {"cursor": value}}),
            (api, "GET", "/threads", {"params": {"status": value}}),
            (a, "GET", "/threads", {"params": {"limit": value}}),
            (a, "GET", history, {"params": {"since": value}}),
            (a, "GET", history, {"params": {"limit": value}}),
            (a, "GET", history, {"params": {"cursor": value}}),
            (b, "GET", "/inbox", {"params": {"limit": value}}),
            (a, "GET", "/directory", {"params": {"query": value}}),
            (a, "GET", "/directory", {"params": {"active": value}}),
            (a, "GET", "/search", {"params": {"q": value}}),
            *[
                (caller, "GET", "/search", {"params": {"q": "x", name: value}})
                for caller in (a, api)
                for name in ("sender", "thread", "kind", "since", "until", "limit", "cursor")
            ],
        ]
    cases += [
        (a, "GET", history, {"params": {"since": "2026-13-45T99:99:99Z"}}),
        (a, "GET", history, {"params": {"since": "2026-01-01T00:00:00"}}),
        (a, "GET", history, {"params": {"since": "msg_zzzz"}}),
        (a, "GET", history, {"params": {"cursor": "bXNnXw"}}),
        (api, "GET", "/deliveries", {"params": [("state", "failed"), ("state", "stalled")]}),
    ]
    run_batch(cases)


def test_odd_headers_never_give_500(scene: Scene) -> None:
    send = f"/threads/{scene.thread_id}/messages"
    a = scene.alpha
    keys: list[bytes] = [
        b"",
        b"k" * 129,
        b"k" * 5000,
        b"has space",
        "é".encode(),
        b"\xff\xfe",
        b"\xc3\xa9" * 10,
    ]
    cases: list[tuple[Caller, str, str, dict[str, Any]]] = [
        (a, "POST", send, {"json": {"body": "x"}, "headers": {"Idempotency-Key": key}})
        for key in keys
    ]
    cases += [
        (
            a,
            "POST",
            send,
            {
                "json": {"body": "x"},
                "headers": {"Content-Type": "application/json; charset=latin-1"},
            },
        ),
        (a, "GET", "/me", {"headers": {"Accept": "text/html"}}),
        (a, "GET", "/me", {"headers": {"Authorization": ("Bearer agt_" + "é" * 43).encode()}}),
        (a, "GET", "/me", {"headers": {"Authorization": b"Bearer \xff\xfe"}}),
    ]
    run_batch(cases)


def test_nul_characters_never_give_500(api: Api, scene: Scene) -> None:
    """A NUL (U+0000) is valid JSON and valid in a URL; it must be refused or stored, not crash
    the database driver (PostgreSQL text cannot hold it)."""
    a, b = scene.alpha, scene.beta
    send = f"/threads/{scene.thread_id}/messages"
    cases: list[tuple[Caller, str, str, dict[str, Any]]] = [
        (a, "POST", send, {"json": {"body": "before\u0000after"}}),
        (a, "POST", send, {"json": {"body": "x", "summary": "s\u0000"}}),
        (a, "POST", send, {"json": {"body": "x", "reply_to": "msg_\u0000"}}),
        (a, "POST", "/threads", {"json": {"title": "t\u0000", "participants": ["beta"]}}),
        (a, "POST", "/threads", {"json": {"title": "t", "goal": "\u0000", "participants": []}}),
        (b, "POST", "/acks", {"json": {"ids": ["dlv_\u0000"]}}),
        (b, "POST", "/acks", {"json": {"ids": [scene.delivery_id], "note": "\u0000"}}),
        (api, "POST", "/agents", {"json": {"name": "gamma", "description": "d\u0000"}}),
        (a, "GET", "/threads/th_%00", {}),
        (b, "GET", "/messages/msg_%00", {}),
        (b, "POST", "/deliveries/dlv_%00/received", {}),
        (api, "GET", "/agents/a%00b", {}),
        (api, "GET", "/deliveries/dlv_%00", {}),
        (api, "GET", "/deliveries", {"params": {"agent": "a\u0000"}}),
        (api, "GET", "/deliveries", {"params": {"thread": "th_\u0000"}}),
        (a, "GET", "/directory", {"params": {"query": "\u0000"}}),
    ]
    run_batch(cases)


def test_lone_surrogates_never_give_500(api: Api, scene: Scene) -> None:
    r"""JSON may spell a lone UTF-16 surrogate (``"\ud800"``): not text, and not storable."""
    a = scene.alpha
    send = f"/threads/{scene.thread_id}/messages"
    raw: list[tuple[Caller, str, bytes]] = [
        (a, send, b'{"body": "a\\ud800b"}'),
        (a, send, b'{"body": "x", "summary": "\\udfff"}'),
        (a, "/threads", b'{"title": "\\ud83d", "participants": []}'),
        (scene.beta, "/acks", b'{"ids": ["\\ud800"]}'),
        (api, "/agents", b'{"name": "gamma", "description": "\\ud800"}'),
    ]
    run_batch([(c, "POST", p, {"content": body, "headers": JSON}) for c, p, body in raw])


# --- a rejected request changes nothing ------------------------------------------------------


def test_rejected_sends_change_nothing(api: Api, scene: Scene, database: Database) -> None:
    send = f"/threads/{scene.thread_id}/messages"
    before = counts(database)
    receipt_before = api.delivery(scene.delivery_id)

    response = scene.alpha.post(send, json={"body": "y" * 201})
    assert_error(response, 422, "summary_required", field="summary")
    response = scene.alpha.post(send, json={"body": "x", "kind": "shout"})
    assert_error(response, 422, "validation_error", field="kind")
    response = scene.alpha.post(send, json={"body": "x", "reply_to": "msg_nope"})
    assert_error(response, 422, "validation_error", field="reply_to")
    response = scene.alpha.post("/threads/th_nope/messages", json={"body": "x"})
    assert_error(response, 404, "not_found")
    assert counts(database) == before

    api.agent("gone")
    lonely = scene.alpha.open_thread("Alone", ["gone"])
    api.ok("POST", "/agents/gone/archive")
    before = counts(database)
    response = scene.alpha.post(f"/threads/{lonely['id']}/messages", json={"body": "anyone?"})
    assert_error(response, 409, "no_recipients")
    assert counts(database) == before

    scene.alpha.ok("POST", f"/threads/{scene.thread_id}/close-request", 202)
    response = scene.beta.post(send, json={"body": "one more thing"})
    assert_error(response, 409, "thread_not_open")
    assert counts(database) == before
    assert api.delivery(scene.delivery_id) == receipt_before
    assert scene.beta.inbox()["waiting"] == 1


def test_rejected_thread_and_agent_creation_change_nothing(
    api: Api, scene: Scene, database: Database
) -> None:
    before = counts(database)

    def agents() -> list[tuple[str, str, str]]:
        items = api.ok("GET", "/agents")["items"]
        return [(a["id"], a["username"], a["status"]) for a in items]

    agents_before = agents()
    response = scene.alpha.post("/threads", json={"title": "t", "participants": ["nobody"]})
    assert_error(response, 422, "validation_error", field="participants")
    response = scene.alpha.post("/threads", json={"title": "", "participants": ["beta"]})
    assert_error(response, 422, "validation_error", field="title")
    assert_error(api.post("/agents", json={"name": "alpha"}), 409, "username_taken")
    assert_error(api.post("/agents", json={"name": "Bad Name"}), 422, "validation_error")
    assert counts(database) == before
    assert agents() == agents_before


def test_rejected_ack_batch_changes_nothing(api: Api, scene: Scene) -> None:
    response = scene.beta.post("/acks", json={"ids": [scene.delivery_id], "outcome": "maybe"})
    assert_error(response, 422, "validation_error", field="outcome")
    response = scene.beta.post("/acks", json={"ids": [scene.delivery_id] + ["x"] * 100})
    assert_error(response, 422, "validation_error", field="ids")
    assert api.delivery(scene.delivery_id)["acknowledged_at"] is None
    assert scene.beta.inbox()["waiting"] == 1


def test_rejected_send_does_not_use_up_its_idempotency_key(
    scene: Scene, database: Database
) -> None:
    send = f"/threads/{scene.thread_id}/messages"
    key = {"Idempotency-Key": "retry-me-1"}
    response = scene.alpha.post(send, json={"body": "z" * 300}, headers=key)
    assert_error(response, 422, "summary_required")
    before = counts(database)
    first = scene.alpha.send(scene.thread_id, "z" * 300, summary="now with one", headers=key)
    assert first["duplicate"] is False
    assert counts(database)["messages"] == before["messages"] + 1


# --- unknown request fields ---------------------------------------------------------------------


def test_an_unknown_field_is_refused_not_dropped(scene: Scene) -> None:
    """A misspelt or unsupported field is 422 unknown_field naming it and what the request takes;
    nothing is stored (it used to be a 201 that silently lost the value)."""
    before = scene.alpha.ok("GET", f"/threads/{scene.thread_id}/messages")["items"]
    response = scene.alpha.post(
        f"/threads/{scene.thread_id}/messages", json={"body": "hello", "priorty": "urgent"}
    )
    assert_error(response, 422, "unknown_field")
    error = response.json()["error"]
    assert error["field"] == "priorty"
    assert "priorty" in error["message"] and "body" in error["message"], error
    after = scene.alpha.ok("GET", f"/threads/{scene.thread_id}/messages")["items"]
    assert after == before
    for path, body in (
        ("/threads", {"title": "t", "participants": ["beta"], "ttl": 5}),
        ("/acks", {"ids": [scene.delivery_id], "reason": "done"}),
    ):
        assert_error(scene.alpha.post(path, json=body), 422, "unknown_field")


def test_a_call_that_takes_no_body_refuses_fields_before_it_acts(
    api: Api, scene: Scene, raw: httpx.Client
) -> None:
    """``close``, ``close-request``, ``received`` and a webhook rotation take no body: one with
    fields is 422 unknown_field naming the first (the call is not made as if it had been read),
    other content is 422; nothing, ``{}`` and ``null`` pass. 401 still comes first."""
    thread, delivery = scene.thread_id, scene.delivery_id
    # A loopback URL nothing listens on: "hooked" is in no thread, so nothing is sent to it.
    idle = "http://127.0.0.1:9/hook"
    hooked = api.ok("POST", "/agents", 201, json={"name": "hooked", "webhook_url": idle})
    secret = hooked["webhook"]["signing_secret"]
    refused = [
        (api, f"/threads/{thread}/close", {"force": True}),
        (scene.alpha, f"/threads/{thread}/close-request", {"reason": "done"}),
        (scene.beta, f"/deliveries/{delivery}/received", {"zzz": 1}),
        (api, f"/agents/{hooked['id']}/webhook/rotate", {"grace_seconds": 60}),
    ]
    for caller, path, body in refused:
        error = assert_error(caller.post(path, json=body), 422, "unknown_field", label=path)
        assert error["field"] == next(iter(body)), error
        assert "takes no body" in error["message"], error
        for content in (b"[1]", b'"text"', b"{not json"):
            response = caller.post(path, content=content, headers=JSON)
            assert_error(response, 422, "validation_error", label=(path, content))
        unauthenticated = raw.post(f"{api.base_url}/v1{path}", json=body)
        assert unauthenticated.status_code == 401, unauthenticated.text
    # Nothing happened: the thread is open, the delivery not stamped, the secret the same.
    assert api.ok("GET", f"/threads/{thread}")["status"] == "open"
    assert api.delivery(delivery)["delivered_at"] is None
    assert api.ok("GET", f"/agents/{hooked['id']}/webhook")["signing_secret"] == secret
    # Nothing, {} and null are no body at all.
    scene.beta.ok("POST", f"/deliveries/{delivery}/received")
    assert api.delivery(delivery)["delivered_at"] is not None
    scene.alpha.ok("POST", f"/threads/{thread}/close-request", 202, json={})
    response = api.post(f"/threads/{thread}/close", content=b"null", headers=JSON)
    assert response.status_code == 200, response.text
    rotated = api.ok("POST", f"/agents/{hooked['id']}/webhook/rotate", json={})
    assert rotated["signing_secret"] != secret


def test_json_nested_too_deep_on_a_call_without_a_body_is_422_and_the_connection_lives(
    api: Api, scene: Scene
) -> None:
    """JSON nested deeper than the parser goes (10,000 levels) sent to a call that takes no body
    is refused like any other content (422), not a crash: the same keep-alive connection serves
    the next request, and the call did not act."""
    thread = scene.thread_id
    for deep in (b"[" * 10_000 + b"]" * 10_000, b'{"a":' * 10_000 + b"1" + b"}" * 10_000):
        for path in (f"/threads/{thread}/close", "/me/webhook/rotate"):
            caller = api if "close" in path else scene.alpha
            response = caller.post(path, content=deep, headers=JSON)
            assert_error(response, 422, "validation_error", label=path)
            assert caller.get("/threads").status_code == 200  # the connection was kept
    assert api.ok("GET", f"/threads/{thread}")["status"] == "open"


def test_two_authorization_headers_are_401_and_two_idempotency_keys_422(
    api: Api, scene: Scene, other_api: Api
) -> None:
    """A request carrying two Authorization headers names no single caller: 401, whichever
    comes first and whether or not both are good (a proxy reading the last one would act as
    someone else). Two Idempotency-Keys on a send are 422: which one would count? Nothing is
    stored."""
    stranger = other_api.agent("stranger")
    thread = scene.thread_id
    url = f"{api.base_url}/v1/threads/{thread}/messages"
    before = len(scene.alpha.ok("GET", f"/threads/{thread}/messages")["items"])
    for first, second in (
        (scene.alpha.token, stranger.token),
        (stranger.token, scene.alpha.token),
        (scene.alpha.token, scene.alpha.token),
        (scene.alpha.token, "garbage"),
    ):
        headers = [("Authorization", f"Bearer {first}"), ("Authorization", f"Bearer {second}")]
        for method, target, body in (
            ("GET", f"{api.base_url}/v1/me", None),
            ("POST", url, {"body": "from whom?"}),
        ):
            response = httpx.request(method, target, json=body, headers=headers)
            error = assert_error(response, 401, "unauthorized", label=(method, first[:4]))
            assert "one Authorization" in error["message"], error
            assert response.headers["www-authenticate"] == "Bearer"
    keys = [*scene.alpha.headers.items(), ("Idempotency-Key", "k-1"), ("Idempotency-Key", "k-2")]
    response = httpx.post(url, json={"body": "twice keyed"}, headers=keys)
    error = assert_error(response, 422, "validation_error", field="idempotency_key")
    assert "one Idempotency-Key" in error["message"], error
    after = scene.alpha.ok("GET", f"/threads/{thread}/messages")["items"]
    assert len(after) == before
    # One of each still works.
    one = [*scene.alpha.headers.items(), ("Idempotency-Key", "k-1")]
    assert httpx.post(url, json={"body": "keyed once"}, headers=one).status_code == 201


def test_a_json_body_sent_as_another_type_says_the_content_type_is_wrong(
    scene: Scene, database: Database
) -> None:
    """A JSON object sent as a form, as plain text or with no Content-Type is refused with a
    message that names the header (the body itself is fine), and nothing is stored."""
    before = counts(database)
    body = json.dumps({"body": "hello"}).encode()
    for content_type in ("application/x-www-form-urlencoded", "text/plain", None):
        headers = {} if content_type is None else {"Content-Type": content_type}
        response = scene.alpha.post(
            f"/threads/{scene.thread_id}/messages", content=body, headers=headers
        )
        message = assert_error(response, 422, "validation_error", label=content_type)["message"]
        assert "Content-Type: application/json" in message, (content_type, message)
        said = repr(content_type) if content_type else "is missing"
        assert said in message, (content_type, message)
    # A JSON type with parameters, or a +json type, is read as JSON.
    for content_type in ("application/json; charset=utf-8", "application/vnd.api+json"):
        response = scene.alpha.post(
            f"/threads/{scene.thread_id}/messages",
            content=body,
            headers={"Content-Type": content_type},
        )
        assert response.status_code == 201, (content_type, response.text)
    after = counts(database)
    assert after["messages"] == before["messages"] + 2, (before, after)


def test_a_number_too_long_to_read_is_422_without_python_in_the_message(scene: Scene) -> None:
    """Python refuses to parse an integer of more than 4,300 digits; the answer says so in the
    API's words, not by naming a Python function."""
    content = b'{"body": "x", "ttl_seconds": ' + b"9" * 5001 + b"}"
    response = scene.alpha.post(
        f"/threads/{scene.thread_id}/messages", content=content, headers=JSON
    )
    message = assert_error(response, 422, "invalid_json")["message"]
    assert "4,300 digits" in message and "sys." not in message, message


def test_true_or_false_is_not_a_number(scene: Scene) -> None:
    """Lax validation would read true as 1: a number field refuses a boolean, naming it."""
    for value in (True, False):
        response = scene.alpha.post(
            f"/threads/{scene.thread_id}/messages", json={"body": "x", "ttl_seconds": value}
        )
        error = assert_error(response, 422, "validation_error", field="ttl_seconds", label=value)
        assert "not true or false" in error["message"], error
    sent = scene.alpha.send(scene.thread_id, "x", ttl_seconds=300)
    assert sent["message"]["ttl_seconds"] == 300


def test_text_is_not_a_number_over_http(scene: Scene, api: Api) -> None:
    """Lax validation would read "300" as 300: over HTTP a number field refuses text, naming it
    (MCP tool arguments still take it: some harnesses send numbers as text)."""
    response = scene.alpha.post(
        f"/threads/{scene.thread_id}/messages", json={"body": "x", "ttl_seconds": "300"}
    )
    error = assert_error(response, 422, "validation_error", field="ttl_seconds")
    assert "not text" in error["message"] and "without quotes" in error["message"], error
    refused = api.post("/enrollments", json={"uses": "2"})
    assert assert_error(refused, 422, "validation_error", field="uses")
    assert api.ok("GET", "/enrollments")["items"] == []  # nothing made


def test_the_send_routes_document_their_429(api: Api) -> None:
    """The caps and the rate limit answer a send with 429: /openapi.json says so on both send
    routes, with the error envelope."""
    spec = api.client.get("/openapi.json").json()
    for path in ("/v1/threads/{thread_id}/messages", "/v1/messages"):
        refused = spec["paths"][path]["post"]["responses"]["429"]
        assert "rate_limited" in refused["description"], (path, refused)
        schema = refused["content"]["application/json"]["schema"]
        assert schema["$ref"].endswith("/ErrorEnvelope"), (path, schema)


def test_the_routes_that_answer_expired_document_their_410(api: Api) -> None:
    """Reading, marking received and working on an expired delivery answer 410 ``expired``:
    /openapi.json says so on those three routes, with the error envelope."""
    spec = api.client.get("/openapi.json").json()
    for path, method in (
        ("/v1/messages/{message_or_delivery_id}", "get"),
        ("/v1/deliveries/{delivery_id}/received", "post"),
        ("/v1/deliveries/{delivery_id}/working", "post"),
    ):
        gone = spec["paths"][path][method]["responses"]["410"]
        assert "expired" in gone["description"], (path, gone)
        schema = gone["content"]["application/json"]["schema"]
        assert schema["$ref"].endswith("/ErrorEnvelope"), (path, schema)
