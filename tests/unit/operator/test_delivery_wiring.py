"""Mailbox webhook delivery is driven by the MailboxMessages' watch, not by polling.

The wired stream of MailboxMessages keeps an index of the pending items (whole: the POST
needs the message) and kicks each pending item into the delivery controller's queue; a
delivered item leaves the index, and its key then finds nothing to do.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from swarmkit_api import GROUP, VERSION
from swarmkit_api.effects import DELIVERY_LABEL, DELIVERY_PENDING
from swarmkit_operator import k8s
from swarmkit_operator.config import OperatorConfig, RunsSettings
from swarmkit_operator.delivery import PENDING_DELIVERIES, Delivery
from swarmkit_operator.handlers import root
from swarmkit_operator.indexes import IndexId


def item(label: str, rv: str, state: str = "") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "m1",
            "namespace": "ns",
            "uid": "m1-uid",
            "resourceVersion": rv,
            "labels": {DELIVERY_LABEL: label},
        },
        "spec": {"mailbox": "ops", "workspace": "default", "message": "disk 91%"},
        "status": {"delivery": {"state": state, "attempts": 1}} if state else {},
    }


async def test_a_pending_items_event_kicks_it_and_a_delivered_one_leaves_the_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wired = root.wiring()
    ctl = wired.controller(OperatorConfig())
    view = ctl.indexes.view
    delivery = Delivery(view(PENDING_DELIVERIES), view(IndexId.RUNS_WORKSPACES), RunsSettings())
    app = SimpleNamespace(controller=ctl, delivery=delivery, library=None)
    dispatch = wired.events.dispatcher(GROUP, VERSION, "mailboxmessages")
    assert dispatch is not None

    async def event(type_: str, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        await dispatch(
            type=type_, body=body, namespace=meta["namespace"], name=meta["name"],
            uid=meta["uid"], labels=meta["labels"], spec=body["spec"], status=body["status"],
            app=app, resource_plural="mailboxmessages",
        )  # fmt: skip

    await event("ADDED", item(DELIVERY_PENDING, "1"))
    assert ctl.lookup(PENDING_DELIVERIES, ("ns", "m1"))["spec"]["message"] == "disk 91%"
    assert delivery.queue.pending(("ns", "m1"))
    key = await delivery.queue.get()
    delivery.queue.done(key)
    # Recorded Delivered, its label not changed yet (a second write): never posted again,
    # the label is repaired.
    labelled: list[dict[str, str]] = []

    async def label(plural: str, namespace: str, name: str, labels: dict[str, str]) -> None:
        labelled.append(labels)

    async def no_post(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("posted a delivered item again")

    monkeypatch.setattr(k8s, "patch_custom_labels", label)
    monkeypatch.setattr(delivery, "deliver", no_post)
    await event("MODIFIED", item(DELIVERY_PENDING, "2", state="Delivered"))
    assert (await delivery._work(("ns", "m1"))).outcome == "changed"
    assert labelled == [{DELIVERY_LABEL: "delivered"}]
    assert (await delivery._work(("ns", "m1"))).outcome == "unchanged"
    delivery.queue.done(await delivery.queue.get())  # that event's kick, looked at above
    # Delivered: the label changes, the item leaves the index, nothing is queued again and
    # a key still on its way finds nothing to post.
    await event("MODIFIED", item("delivered", "3", state="Delivered"))
    assert ctl.lookup(PENDING_DELIVERIES, ("ns", "m1")) is None
    assert not delivery.queue.pending(("ns", "m1"))
    assert (await delivery._work(("ns", "m1"))).outcome == "gone"


async def test_without_the_teams_grant_the_attempt_names_the_secret_and_the_grant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chart grants no verb on Secrets (issue 41): the webhook's URL is read with a GET
    of its one Secret, which the team grants by name. Refused (403), the attempt records
    which Secret and which grant, is retried on its backoff, and nothing is posted."""
    from datetime import UTC, datetime

    from tests.support.fake_k8s import FakeApi

    api = FakeApi().install(monkeypatch)
    api.refuse("GET", r"^/api/v1/namespaces/ns/secrets/hook$", 403, message="forbidden")
    recorded: list[dict[str, Any]] = []

    async def patch_status(plural: str, ns: str, name: str, body: Any, manager: str) -> None:
        recorded.append(body["delivery"])

    async def post_event(*args: Any) -> None:
        return None

    monkeypatch.setattr(k8s, "patch_status", patch_status)
    monkeypatch.setattr(k8s, "post_event", post_event)
    webhook = {"urlSecretRef": {"name": "hook", "key": "url"}}
    ws = {"spec": {"mailboxes": [{"name": "ops", "webhook": webhook}]}}
    delivery = Delivery({}, {("ns", "default"): [ws]}, RunsSettings())

    class NoSession:
        def post(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("posted without a URL")

    now = datetime(2026, 1, 1, tzinfo=UTC)
    retry = await delivery.deliver(NoSession(), item(DELIVERY_PENDING, "1"), now)  # type: ignore[arg-type]
    assert retry is not None and retry > now
    [attempt] = recorded
    assert attempt["state"] == "Pending" and attempt["attempts"] == 1
    assert attempt["lastError"] == (
        "the operator may not read Secret ns/hook: the team grants it get on that one Secret "
        "(a Role with resourceNames, see the RBAC reference)"
    )
    # one GET of that Secret by name: never a LIST of the namespace's Secrets
    assert [r for r in api.requests if "/secrets" in r[1]] == [
        ("GET", "/api/v1/namespaces/ns/secrets/hook")
    ]
