"""The web view's mailboxes page, from the operator's real MailboxMessage index.

Items as the API shows them go through the index function ``handlers.library`` marks (the
same one the operator's watch feeds), then the page is fetched over HTTP from a running
:class:`WebView`. (The browser test against the real operator and runner is in
tests/integration/test_webview_browser.py.)
"""

from __future__ import annotations

import re
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from swarmkit_operator.indexes import Indexes, IndexId
from swarmkit_operator.webview import Sources, WebView
from swarmkit_operator.webview.mailboxes import MESSAGE_CAP_BYTES

from .fixtures import indexes, run

XSS = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'
LONG = "é" * 1500 + "TAIL-NOT-SHOWN"  # 3,014 bytes; é is two bytes in UTF-8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def item(
    name: str,
    message: str,
    *,
    namespace: str = "ns",
    mailbox: str = "ops",
    created: str = "2026-12-05T08:00:00Z",
    agent: str = "watcher",
    run_name: str = "watch",
    ack: dict[str, Any] | None = None,
    acked_at: str = "2026-12-05T09:30:00Z",
    delivery: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A MailboxMessage as the API returns it (managedFields as the apiserver writes them)."""
    managed = [
        {
            "manager": "swarmkit-operator",
            "operation": "Update",
            "time": created,
            "fieldsV1": {"f:spec": {"f:mailbox": {}, "f:message": {}, "f:sender": {}}},
        }
    ]
    spec: dict[str, Any] = {
        "mailbox": mailbox,
        "message": message,
        "sender": {"agent": agent, "run": run_name, "correlationId": "c1"},
        "workspace": "default",
    }
    if ack is not None:
        spec["acknowledgement"] = ack
        managed.append(
            {
                "manager": "kubectl-swarmkit",
                "operation": "Update",
                "time": acked_at,
                "fieldsV1": {"f:spec": {"f:acknowledgement": {"f:by": {}}}},
            }
        )
    body: dict[str, Any] = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "MailboxMessage",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "resourceVersion": "1",
            "creationTimestamp": created,
            "labels": {"swarmkit.dev/mailbox": mailbox},
            "managedFields": managed,
        },
        "spec": spec,
        "status": {"delivery": delivery} if delivery else {},
    }
    return body


def populated() -> Indexes:
    idx = indexes()
    idx.update("mailboxmessages", item("watch-1a2b-fx0", XSS, created="2026-12-05T08:00:00Z"))
    idx.update(
        "mailboxmessages",
        item(
            "watch-1a2b-fx1",
            "disk 91%",
            created="2026-12-05T09:00:00Z",
            ack={"by": "dave", "comment": f"on it {XSS}"},
            delivery={"state": "Delivered", "attempts": 2, "lastError": ""},
        ),
    )
    idx.update("mailboxmessages", item("watch-1a2b-fx2", LONG, created="2026-12-05T07:00:00Z"))
    idx.update(
        "mailboxmessages",
        item("other-9f-fx0", "elsewhere", namespace="team-b", mailbox="finance"),
    )
    sender = run("watch", output="posted")
    sender["status"]["effects"] = [
        {"seq": 0, "kind": "mailbox_send", "agent": "watcher", "to": "ops",
         "state": "Materialized", "object": "MailboxMessage/watch-1a2b-fx0"},
    ]  # fmt: skip
    idx.update("runs", sender)
    return idx


@pytest.fixture
async def served() -> AsyncIterator[tuple[httpx.AsyncClient, Indexes]]:
    idx = populated()
    view = WebView(Sources(idx))
    port = free_port()
    await view.start("127.0.0.1", port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
            yield c, idx
    finally:
        await view.stop()


def rows(page: str) -> dict[str, str]:
    """Each item row's HTML by item name, in page order."""
    found = re.findall(r'(<tr class="item [^"]*"[^>]*data-item="([^"]+)">.*?</tr>)', page, re.S)
    return {name: row for row, name in found}


async def test_each_mailbox_lists_its_items_newest_first_per_namespace(
    served: tuple[httpx.AsyncClient, Indexes],
) -> None:
    client, _ = served
    resp = await client.get("/mailboxes")
    assert resp.status_code == 200
    page = resp.text
    assert '<a href="/mailboxes">Mailboxes</a>' in page  # in the nav of every page
    assert '<a href="/mailboxes">Mailboxes</a>' in (await client.get("/runs")).text
    assert '<h2><a href="/mailboxes/ns">ns</a></h2>' in page
    assert '<h2><a href="/mailboxes/team-b">team-b</a></h2>' in page
    assert "3 items, 2 not acknowledged" in page
    assert list(rows(page)) == [
        "watch-1a2b-fx1",
        "watch-1a2b-fx0",
        "watch-1a2b-fx2",
        "other-9f-fx0",
    ]
    assert '<a href="/runs/ns/watch">watch</a>' in page  # the sending Run

    one = (await client.get("/mailboxes/team-b")).text
    assert list(rows(one)) == ["other-9f-fx0"]
    empty = await client.get("/mailboxes/nobody")
    assert empty.status_code == 200 and "no mailbox items in nobody" in empty.text


async def test_a_hostile_message_and_comment_are_shown_as_text(
    served: tuple[httpx.AsyncClient, Indexes],
) -> None:
    client, _ = served
    page = (await client.get("/mailboxes/ns")).text
    assert "<script>" not in page and "<img" not in page
    escaped = (
        "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
    )
    assert f'<pre class="message">{escaped}</pre>' in page
    assert f'<div class="comment">on it {escaped}</div>' in page


async def test_acknowledged_and_unacknowledged_items(
    served: tuple[httpx.AsyncClient, Indexes],
) -> None:
    client, idx = served
    by_name = rows((await client.get("/mailboxes/ns")).text)
    acked = by_name["watch-1a2b-fx1"]
    assert acked.startswith('<tr class="item acknowledged"')
    assert '<span class="by">dave</span>' in acked
    assert "at 2026-12-05T09:30:00Z" in acked  # the managedFields time of that write
    assert "Delivered" in acked and "2 attempts" in acked
    pending = by_name["watch-1a2b-fx0"]
    assert pending.startswith('<tr class="item unacknowledged"')
    assert "not acknowledged" in pending and 'class="by"' not in pending

    # Acknowledged later (the watch's MODIFIED event): the page follows the index.
    body = item("watch-1a2b-fx0", XSS, ack={"by": "erin"}, acked_at="2026-12-05T10:00:00Z")
    body["metadata"]["uid"] = next(
        uid
        for uid, v in idx.data[IndexId.WEBVIEW_MAILBOX_ITEMS][("ns", "ops")].items()
        if v["name"] == "watch-1a2b-fx0"
    )
    idx.update("mailboxmessages", body)
    page = (await client.get("/mailboxes/ns")).text
    assert "3 items, 1 not acknowledged" in page
    assert '<span class="by">erin</span>' in page and "at 2026-12-05T10:00:00Z" in page
    idx.delete("mailboxmessages", body["metadata"]["uid"])
    page = (await client.get("/mailboxes/ns")).text
    assert "watch-1a2b-fx0" not in page and "2 items, 1 not acknowledged" in page


async def test_a_long_message_is_capped_at_whole_characters(
    served: tuple[httpx.AsyncClient, Indexes],
) -> None:
    client, idx = served
    [kept] = [v for v in idx.values(IndexId.WEBVIEW_MAILBOX_ITEMS, ("ns", "ops")) if v["truncated"]]
    assert kept["message"] == "é" * (MESSAGE_CAP_BYTES // 2)  # the index keeps 2 KiB only
    assert kept["message_bytes"] == len(LONG.encode())
    page = (await client.get("/mailboxes/ns")).text
    assert "TAIL-NOT-SHOWN" not in page
    assert f'<pre class="message">{"é" * 1024}</pre>' in page
    assert f"first {MESSAGE_CAP_BYTES} of {len(LONG.encode())} bytes" in page
    assert "bytes (kubectl" not in rows(page)["watch-1a2b-fx1"]  # a short one is whole


async def test_a_runs_mailbox_effect_links_to_its_item(
    served: tuple[httpx.AsyncClient, Indexes],
) -> None:
    client, _ = served
    run_page = (await client.get("/runs/ns/watch")).text
    link = '<a href="/mailboxes/ns#item-watch-1a2b-fx0">MailboxMessage/watch-1a2b-fx0</a>'
    assert link in run_page
    assert 'id="item-watch-1a2b-fx0"' in (await client.get("/mailboxes/ns")).text


async def test_the_mailboxes_page_is_read_only(served: tuple[httpx.AsyncClient, Indexes]) -> None:
    client, _ = served
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        resp = await client.request(method, "/mailboxes/ns")
        assert resp.status_code == 405 and resp.headers["Allow"] == "GET, HEAD"
