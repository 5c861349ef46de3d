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
    delivery = Delivery(view(PENDING_DELIVERIES), view("runs_workspaces"), RunsSettings())
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
