"""The README walk-through, end to end over HTTP."""

from __future__ import annotations

from tests.helpers import Api


def test_walkthrough_register_open_post_list_read_ack(api: Api) -> None:
    reviewer = api.agent("reviewer")
    implementer = api.agent("implementer")
    thread = reviewer.open_thread("Review the schema migration", ["implementer"])
    sent = reviewer.send(thread["id"], "Please review PR 12", kind="task")
    assert sent["duplicate"] is False
    assert [d["recipient"] for d in sent["deliveries"]] == ["implementer"]

    inbox = implementer.inbox()
    assert inbox["returned"] == 1 and inbox["waiting"] == 1 and inbox["more"] is False
    item = inbox["items"][0]
    assert item["summary"] == "Please review PR 12" and item["state"] == "delivered"

    read = implementer.ok("GET", f"/messages/{item['message_id']}")
    assert read["message"]["body"] == "Please review PR 12"
    assert read["delivery"]["state"] == "fetched"

    acked = implementer.ok("POST", "/acks", json={"ids": [item["delivery_id"]], "outcome": "done"})
    assert acked == {"acknowledged": [item["delivery_id"]], "already": [], "not_found": []}
    receipt = api.delivery(item["delivery_id"])
    assert receipt["state"] == "acknowledged" and receipt["outcome"] == "done"
    assert implementer.inbox()["items"] == []
