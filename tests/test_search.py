"""Message search (``GET /v1/search``, MCP ``search_messages``, ``Client.search``): ranked
full-text over thread titles, summaries and bodies, only what the caller may read, with user
text that is never query syntax. Both databases, the real server, the real MCP client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from inbots.client import Client, InbotsError
from inbots.db.engine import Database
from inbots.search.service import snippet
from tests.conftest import ServerThread
from tests.helpers import Api, Caller
from tests.mcp_client import over_bridge, over_http, run


def search(who: Caller, q: str | None, **params: Any) -> dict[str, Any]:
    query = {"q": q, **params} if q is not None else params
    return who.ok("GET", "/search", params=query)  # type: ignore[no-any-return]


def ids(page: dict[str, Any]) -> list[str]:
    return [hit["message_id"] for hit in page["items"]]


def trio(api: Api) -> tuple[Caller, Caller, Caller]:
    return api.agent("alice"), api.agent("bob"), api.agent("carol")


# Finding and ranking


def test_a_word_in_the_body_finds_the_message_with_every_field(api: Api) -> None:
    alice, bob, _ = trio(api)
    thread = alice.open_thread("Quarterly numbers", ["bob"])
    sent = alice.send(thread["id"], "Please check the reconciliation sheet today", kind="task")
    alice.send(thread["id"], "Something else entirely")

    page = search(bob, "reconciliation")

    assert page["next_cursor"] is None
    (hit,) = page["items"]
    assert set(hit) == {
        "message_id",
        "thread_id",
        "thread_title",
        "sender",
        "kind",
        "summary",
        "snippet",
        "created_at",
    }
    assert hit["message_id"] == sent["message"]["id"]
    assert hit["thread_id"] == thread["id"]
    assert hit["thread_title"] == "Quarterly numbers"
    assert hit["sender"] == "alice" and hit["kind"] == "task" and hit["summary"] is None
    assert hit["created_at"] == sent["message"]["created_at"]
    assert "[reconciliation]" in hit["snippet"] and "\n" not in hit["snippet"]


def test_title_and_summary_are_searched_and_outrank_the_body(api: Api) -> None:
    alice, bob, _ = trio(api)
    by_title = alice.open_thread("Migration of the ledger", ["bob"])
    plain = alice.open_thread("Other things", ["bob"])
    in_title = alice.send(by_title["id"], "Start when you can.")
    in_summary = alice.send(plain["id"], "Details follow.", summary="ledger migration plan")
    in_body = alice.send(
        plain["id"],
        "A long note about many things, among them the ledger and, later, its migration, "
        "with plenty of other words around them so the match is diluted.",
    )

    found = ids(search(bob, "ledger migration"))

    assert set(found) == {
        in_title["message"]["id"],
        in_summary["message"]["id"],
        in_body["message"]["id"],
    }
    assert found[-1] == in_body["message"]["id"], found


def test_more_occurrences_rank_higher(api: Api) -> None:
    alice, bob, _ = trio(api)
    thread = alice.open_thread("Weekly", ["bob"])
    once = alice.send(thread["id"], "The firewall rules changed; other topics were discussed too.")
    thrice = alice.send(thread["id"], "Firewall firewall firewall: the firewall is down.")

    assert ids(search(bob, "firewall")) == [thrice["message"]["id"], once["message"]["id"]]


def test_every_word_must_match_as_a_whole_word_in_any_case(api: Api) -> None:
    alice, bob, _ = trio(api)
    thread = alice.open_thread("Ops", ["bob"])
    both = alice.send(thread["id"], "We deployed the canary to staging.")
    alice.send(thread["id"], "We deployed nothing today.")

    assert ids(search(bob, "deployed canary")) == [both["message"]["id"]]
    assert ids(search(bob, "DEPLOYED Canary")) == [both["message"]["id"]]
    assert search(bob, "deployed giraffe")["items"] == []
    assert search(bob, "deploy canary")["items"] == []  # whole words: no prefixes


# Filters and paging


def test_filters_sender_thread_kind_and_time(api: Api) -> None:
    alice, bob, carol = trio(api)
    first = alice.open_thread("Budget", ["bob", "carol"])
    second = bob.open_thread("Budget too", ["alice", "carol"])
    a1 = alice.send(first["id"], "budget question one", kind="question")
    b1 = bob.send(second["id"], "budget update two", kind="update")
    c1 = carol.send(first["id"], "budget task three", kind="task")

    everything = {a1["message"]["id"], b1["message"]["id"], c1["message"]["id"]}
    assert set(ids(search(alice, "budget"))) == everything
    assert ids(search(alice, "budget", sender="bob")) == [b1["message"]["id"]]
    assert set(ids(search(alice, "budget", thread=first["id"]))) == {
        a1["message"]["id"],
        c1["message"]["id"],
    }
    assert ids(search(alice, "budget", kind="task")) == [c1["message"]["id"]]
    assert search(alice, "budget", sender="nobody-here")["items"] == []

    at = datetime.fromisoformat(b1["message"]["created_at"].replace("Z", "+00:00"))
    since = at.isoformat().replace("+00:00", "Z")
    later = search(alice, "budget", since=since)
    assert b1["message"]["id"] in ids(later) and a1["message"]["id"] not in ids(later)
    earlier = search(alice, "budget", until=since)
    assert ids(earlier) == [a1["message"]["id"]]
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert search(alice, "budget", since=future)["items"] == []


def test_paging_walks_every_result_once_in_rank_order(api: Api) -> None:
    alice, bob, _ = trio(api)
    thread = alice.open_thread("Paging", ["bob"])
    sent = [alice.send(thread["id"], "invoice " * (i + 1))["message"]["id"] for i in range(7)]

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = search(bob, "invoice", **params)
        assert len(page["items"]) <= 3
        seen += ids(page)
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert sorted(seen) == sorted(sent) and len(seen) == len(set(seen))
    assert seen == ids(search(bob, "invoice", limit=50))


def test_a_bad_limit_falls_back_to_the_default(api: Api) -> None:
    alice, bob, _ = trio(api)
    thread = alice.open_thread("Limits", ["bob"])
    alice.send(thread["id"], "quota")
    for limit in ("abc", "0", "100000"):
        assert len(search(bob, "quota", limit=limit)["items"]) == 1


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"kind": "memo"}, "kind"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-13-01T00:00:00Z"}, "until"),
        ({"since": "2026-01-01T00:00:00"}, "since"),
        ({"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "since"),
        ({"thread": "not-a-thread"}, "thread"),
        ({"sender": "Not A Name"}, "sender"),
        ({"cursor": "garbage!"}, "cursor"),
        ({"cursor": "YWJj"}, "cursor"),
    ],
)
def test_malformed_filters_are_422_naming_the_field(
    api: Api, params: dict[str, str], field: str
) -> None:
    alice = api.agent("alice")
    response = alice.get("/search", params={"q": "anything", **params})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "validation_error" and error["field"] == field
    assert error["message"].endswith(".")


# Visibility


def test_an_agent_never_finds_mail_of_threads_it_is_not_in(api: Api) -> None:
    alice, bob, carol = trio(api)
    private = alice.open_thread("Secret plan", ["bob"])
    alice.send(private["id"], "the password rotation schedule")
    shared = alice.open_thread("Shared", ["bob", "carol"])
    visible = alice.send(shared["id"], "the password policy draft")

    assert ids(search(carol, "password")) == [visible["message"]["id"]]
    assert search(carol, "secret plan")["items"] == []
    assert search(carol, "password", thread=private["id"])["items"] == []
    assert len(search(bob, "password")["items"]) == 2


def test_closed_threads_drop_out_for_agents_not_for_the_operator(api: Api) -> None:
    alice, bob, _ = trio(api)
    thread = alice.open_thread("Archive me", ["bob"])
    alice.send(thread["id"], "telescope alignment notes")
    assert len(search(bob, "telescope")["items"]) == 1

    api.ok("POST", f"/threads/{thread['id']}/close")

    assert search(bob, "telescope")["items"] == []
    assert search(alice, "telescope")["items"] == []
    assert len(search(api, "telescope")["items"]) == 1


def test_the_operator_sees_its_workspace_and_never_another(api: Api, other_api: Api) -> None:
    alice, bob, _ = trio(api)
    thread = alice.open_thread("Ours", ["bob"])
    ours = alice.send(thread["id"], "harbour crane maintenance")
    dave, erin = other_api.agent("dave"), other_api.agent("erin")
    theirs_thread = dave.open_thread("Theirs", ["erin"])
    theirs = dave.send(theirs_thread["id"], "harbour crane maintenance")

    assert ids(search(api, "harbour crane")) == [ours["message"]["id"]]
    assert ids(search(other_api, "harbour crane")) == [theirs["message"]["id"]]
    assert ids(search(erin, "harbour")) == [theirs["message"]["id"]]
    assert search(erin, "harbour", thread=thread["id"])["items"] == []
    assert search(bob, "harbour", sender="dave")["items"] == []


def test_a_search_needs_a_token(api: Api) -> None:
    response = api.client.get("/v1/search", params={"q": "anything"})
    assert response.status_code == 401


# Hostile queries: user text is never syntax


HOSTILE = [
    '"',
    '""',
    '"unbalanced',
    "*",
    "rocket*",
    "%",
    "_",
    "100%",
    "a_b",
    "NEAR",
    "NEAR(rocket fuel)",
    "rocket NEAR fuel",
    "(",
    ")",
    "((rocket",
    "AND",
    "rocket AND",
    "OR rocket",
    "NOT rocket",
    "-rocket",
    "rocket -fuel",
    "title:rocket",
    "{title}: rocket",
    "^rocket",
    "rocket:*",
    "'rocket' & 'fuel'",
    "!rocket | fuel <-> x",
    "\\",
    "rocket\\",
    "'; DROP TABLE messages; --",
    "Überprüfung naïve café 東京 🚀",
    "\u0000rocket",
    "rocket" + "\u00a0" * 3,
    "x" * 199,
]


@pytest.mark.parametrize("q", HOSTILE)
def test_hostile_queries_match_literally_or_are_refused_never_500(api: Api, q: str) -> None:
    alice, bob, _ = trio(api)
    thread = alice.open_thread("Launch", ["bob"])
    alice.send(thread["id"], "rocket fuel AND near NEAR not 100 percent, Überprüfung café 東京")

    response = bob.get("/search", params={"q": q})

    assert response.status_code in (200, 422), (q, response.status_code, response.text)
    if response.status_code == 422:
        error = response.json()["error"]
        # NUL is refused in any query string, before the search sees it.
        codes = {"search_query_invalid"} | ({"validation_error"} if "\x00" in q else set())
        assert error["code"] in codes and error.get("field", "q") == "q", error
    else:
        assert isinstance(response.json()["items"], list)


@pytest.mark.parametrize(
    ("q", "found"),
    [
        ("rocket AND fuel", True),  # AND is a word, and the message has it
        ("NEAR rocket", True),  # so is NEAR
        ("NOT rocket", True),
        ("rocket OR banana", False),  # OR is a word it does not have: every word must match
        ('"rocket fuel"', True),
        ("rocket*", True),
        ("100%", True),
        ("(rocket", True),
        ("Überprüfung", True),
        ("東京", True),
    ],
)
def test_operators_are_words(api: Api, q: str, found: bool) -> None:
    alice, bob, _ = trio(api)
    thread = alice.open_thread("Launch", ["bob"])
    alice.send(thread["id"], "rocket fuel and near not or-not, 100 percent. Überprüfung in 東京")
    alice.send(thread["id"], "banana split")
    assert bool(search(bob, q)["items"]) is found, q


@pytest.mark.parametrize("q", ["", "   ", '"*%_()"', "-- --", "%%%", "_"])
def test_a_query_without_words_is_refused_with_a_sentence(api: Api, q: str) -> None:
    alice = api.agent("alice")
    response = alice.get("/search", params={"q": q})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "search_query_invalid" and error["field"] == "q"
    assert "q " in error["message"] and error["message"].endswith(".")


def test_a_missing_query_is_refused(api: Api) -> None:
    alice = api.agent("alice")
    response = alice.get("/search")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "search_query_invalid"


def test_a_query_too_long_or_with_too_many_words_is_refused(api: Api) -> None:
    alice = api.agent("alice")
    limits = api.ok("GET", "/limits")
    long = alice.get("/search", params={"q": "x" * (limits["search_query_max"] + 1)})
    assert long.status_code == 422 and long.json()["error"]["code"] == "search_query_invalid"
    assert str(limits["search_query_max"]) in long.json()["error"]["message"]
    many = " ".join(f"w{i}" for i in range(limits["search_words_max"] + 1))
    wordy = alice.get("/search", params={"q": many})
    assert wordy.status_code == 422 and wordy.json()["error"]["code"] == "search_query_invalid"


# The index stays consistent


def test_the_index_follows_title_changes_and_deletions(api: Api, database: Database) -> None:
    alice, bob, _ = trio(api)
    thread = alice.open_thread("Walrus project", ["bob"])
    gone = alice.send(thread["id"], "first note")
    kept = alice.send(thread["id"], "second note")
    assert len(search(bob, "walrus")["items"]) == 2

    with database.engine.begin() as conn:  # what a retention job or a rename would do
        conn.execute(
            text("DELETE FROM deliveries WHERE message_id = :m"), {"m": gone["message"]["id"]}
        )
        conn.execute(text("DELETE FROM messages WHERE id = :m"), {"m": gone["message"]["id"]})
        conn.execute(
            text("UPDATE threads SET title = 'Penguin project' WHERE id = :t"), {"t": thread["id"]}
        )

    assert search(bob, "walrus")["items"] == []
    page = search(bob, "penguin")
    assert ids(page) == [kept["message"]["id"]]
    assert page["items"][0]["thread_title"] == "Penguin project"


def test_search_changes_nothing(api: Api) -> None:
    alice, bob, _ = trio(api)
    thread = alice.open_thread("Read state", ["bob"])
    sent = alice.send(thread["id"], "octopus")
    assert len(search(bob, "octopus")["items"]) == 1
    delivery = api.delivery(sent["deliveries"][0]["id"])
    assert delivery["delivered_at"] is None and delivery["fetched_at"] is None


# The other ways in: the published limits and schema, MCP (both backends), the client


def test_limits_and_openapi_publish_the_search(api: Api) -> None:
    limits = api.ok("GET", "/limits")
    assert limits["search_query_max"] == 200 and limits["search_words_max"] == 12
    spec = api.client.get("/openapi.json").json()
    params = {p["name"] for p in spec["paths"]["/v1/search"]["get"]["parameters"]}
    assert params >= {"q", "sender", "thread", "kind", "since", "until", "limit", "cursor"}


@pytest.mark.parametrize("transport", ["http", "bridge"])
def test_search_messages_over_mcp(api: Api, server: ServerThread, transport: str) -> None:
    alice, bob, carol = trio(api)
    thread = alice.open_thread("Glacier survey", ["bob"])
    sent = alice.send(thread["id"], "ice core samples arrived", summary="samples")
    connect = over_http if transport == "http" else over_bridge  # the inbots mcp bridge

    async def scenario() -> None:
        async with connect(server.url, bob.token) as tools:
            listed = {t.name: t for t in (await tools.client.list_tools()).tools}
            schema = listed["search_messages"].input_schema
            assert schema["properties"]["q"]["maxLength"] == 200
            assert schema["properties"]["limit"]["maximum"] == 200
            assert listed["search_messages"].annotations.read_only_hint is True

            found = await tools.ok("search_messages", q="glacier ice")
            assert [h["message_id"] for h in found["items"]] == [sent["message"]["id"]]
            assert found["items"][0]["thread_title"] == "Glacier survey"
            result = await tools.call("search_messages", q="core", kind="update")
            assert sent["message"]["id"] in result.content[0].text  # type: ignore[union-attr]

            code, sentence = await tools.error("search_messages", q='"*"')
            assert code == "search_query_invalid" and "word" in sentence
            code, _ = await tools.error("search_messages", q="ice", since="soon")
            assert code == "validation_error"
            code, _ = await tools.error("search_messages", q="ice", query="x")
            assert code == "unknown_field"

        async with connect(server.url, carol.token) as tools:
            assert (await tools.ok("search_messages", q="glacier"))["items"] == []

    run(scenario)


def test_client_search(api: Api, server: ServerThread) -> None:
    alice, bob, _ = trio(api)
    thread = alice.open_thread("Client", ["bob"])
    sent = alice.send(thread["id"], "zeppelin hangar lease", kind="decision")
    with Client(server.url, bob.token) as client:
        hits = client.search("zeppelin", kind="decision", since=datetime(2020, 1, 1, tzinfo=UTC))
        assert [h.message_id for h in hits.items] == [sent["message"]["id"]]
        assert hits.items[0].snippet and hits.next_cursor is None
        with pytest.raises(InbotsError) as refused:
            client.search("***")
        assert refused.value.code == "search_query_invalid"


# The snippet, cut here the same way on both engines


def test_snippet_marks_whole_words_around_the_best_cluster() -> None:
    body = "Intro words here. " * 10 + "The Deploy of canary went fine; deploy again later."
    cut = snippet(["deploy", "canary"], body, None, "Title")
    assert cut.startswith("…") and "[Deploy] of [canary]" in cut and "[deploy] again" in cut
    assert "\n" not in cut and len(cut) <= 240


def test_snippet_falls_back_to_summary_title_and_the_start() -> None:
    assert snippet(["plan"], "nothing here", "the plan", "x") == "the [plan]"
    assert snippet(["plan"], "nothing here", None, "Plan B") == "[Plan] B"
    assert snippet(["zzz"], "line one\n\nline   two", None, "t") == "line one line two"
    assert snippet(["deploy"], "deployed and redeploy", None, "t") == "deployed and redeploy"
    long = snippet(["x"], "x " + "word " * 200, None, "t")
    assert long.startswith("[x] word") and long.endswith("…") and len(long) <= 240
