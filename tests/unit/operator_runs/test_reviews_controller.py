"""The Reviews controller (swarmkit_operator.reviews): the one writer of a Review's status.

The API is an in-memory store behind the three calls the controller makes (GET, create,
status merge-patch); the controller's own queue and workers run for real.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY

from swarmkit_api.conditions import REASON_TAMPERED_OBJECT
from swarmkit_api.review import (
    CREATED_BY_ANNOTATION,
    GATEWAY_LABEL,
    SKILL_LABEL,
    GatewayReviewAsk,
    GatewaySessionRef,
    ReviewRequest,
)
from swarmkit_operator import k8s, reviews
from swarmkit_operator.builders import trust
from swarmkit_operator.reviews import ReviewsController, Transition

OPERATOR = "system:serviceaccount:swarmkit-system:swarmkit-operator"
NS = "team"


class Store:
    """Reviews by name; ``refuse`` status writes are answered 403 before one lands."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.refuse = 0
        self.writes: list[dict[str, Any]] = []
        self.attempts = 0

    async def get_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.objects.get(name)
        return copy.deepcopy(found) if found is not None else None

    async def create_custom_if_absent(
        self, plural: str, namespace: str, body: dict[str, Any]
    ) -> dict[str, Any] | None:
        name = body["metadata"]["name"]
        if name in self.objects:
            return None
        self.objects[name] = copy.deepcopy(dict(body))
        return copy.deepcopy(self.objects[name])

    async def patch_status_object(
        self, plural: str, namespace: str, name: str, patch: dict[str, Any], manager: str
    ) -> dict[str, Any] | None:
        self.attempts += 1
        if self.refuse:
            self.refuse -= 1
            raise k8s.ApiError("PATCH", f"/reviews/{name}/status", 403, "refused")
        if name not in self.objects:
            return None
        status = self.objects[name].setdefault("status", {})
        status.update({k: v for k, v in patch.items() if v is not None})
        self.writes.append(dict(patch))
        return copy.deepcopy(self.objects[name])


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Store:
    api = Store()
    for name in ("get_custom", "create_custom_if_absent", "patch_status_object"):
        monkeypatch.setattr(reviews.k8s, name, getattr(api, name))

    async def whoami() -> str:
        return OPERATOR

    monkeypatch.setattr(reviews.k8s, "whoami", whoami)
    return api


@pytest.fixture
async def controller(store: Store) -> AsyncIterator[ReviewsController]:
    ctl = ReviewsController()
    ctl.start()
    yield ctl
    await ctl.stop()


def review(name: str, labels: dict[str, str] | None = None, **request: Any) -> dict[str, Any]:
    return {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Review",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": labels or {},
            "annotations": {CREATED_BY_ANNOTATION: OPERATOR},
        },
        "spec": {"request": {"kind": "approval", "question": "May I?", **request}},
    }


def _count(what: str) -> float:
    if what == "retries":
        name, labels = "swarmkit_workqueue_retries_total", {"kind": "Review"}
    else:
        name, labels = "swarmkit_reconcile_total", {"kind": "Review", "outcome": what}
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def eventually(check: Any, seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_refused_status_write_is_retried_through_the_queue_and_lands(
    store: Store, controller: ReviewsController
) -> None:
    store.objects["r-1"] = review("r-1")
    store.refuse = 1
    retries, changed = _count("retries"), _count("changed")
    with pytest.raises(k8s.ApiError, match="403"):
        await controller.transition(NS, "r-1", Transition("Closed"))
    # Nobody asks again: the queue retries the write (backoff) until it lands.
    await eventually(lambda: store.objects["r-1"].get("status", {}).get("state") == "Closed")
    assert store.attempts == 2
    assert store.writes == [{"state": "Closed"}]
    # forgotten once written (the failures are the queue's, like every controller's)
    assert not controller._asked and controller.queue.failures((NS, "r-1")) == 0
    # Counted like every controller's passes: one retry, one pass that changed it.
    await eventually(lambda: _count("changed") == changed + 1)
    assert _count("retries") == retries + 1


async def test_an_asked_transition_is_written_once_and_returned(
    store: Store, controller: ReviewsController
) -> None:
    store.objects["r-2"] = review("r-2")
    asked = Transition("Resumed", "approve", "alice", "2026-12-05T20:00:00Z", "job-1")
    written = await controller.transition(NS, "r-2", asked)
    assert written is not None and written["status"]["resumedJob"] == "job-1"
    again = await controller.transition(NS, "r-2", asked)  # already says so: no write
    assert again is not None and len(store.writes) == 1


async def test_a_transition_of_a_review_that_is_gone_is_none(
    store: Store, controller: ReviewsController
) -> None:
    assert await controller.transition(NS, "gone", Transition("Closed")) is None
    assert store.attempts == 0


async def test_a_gateway_review_expires_at_its_deadline_through_a_delayed_key(
    store: Store, controller: ReviewsController
) -> None:
    deadline = datetime.now(UTC) + timedelta(seconds=0.6)
    body = review(
        "gw-a-1",
        {GATEWAY_LABEL: "a"},
        deadline=deadline.isoformat().replace("+00:00", "Z"),
    )
    store.objects["gw-a-1"] = body
    controller.observed("ADDED", body)
    await eventually(lambda: store.objects["gw-a-1"].get("status", {}).get("state") == "Pending")
    assert controller.queue.pending(("team", "gw-a-1"))  # the expiry: a delayed key
    # No watch event comes: the delayed key alone expires it.
    await eventually(lambda: store.objects["gw-a-1"]["status"]["state"] == "Expired")
    assert datetime.now(UTC) >= deadline
    assert [w["state"] for w in store.writes] == ["Pending", "Expired"]


async def test_a_decided_skill_review_is_recorded_once(
    store: Store, controller: ReviewsController
) -> None:
    body = review("skill-x-1234abcd", {SKILL_LABEL: "x"}, kind="skill_review")
    body["spec"]["decision"] = {"verdict": "approve", "decidedBy": "alice"}
    store.objects[body["metadata"]["name"]] = body
    controller.observed("MODIFIED", body)
    await eventually(lambda: bool(store.writes))
    assert store.writes == [{"state": "Decided", "verdict": "approve", "decidedBy": "alice"}]
    # Its own echo makes nothing due.
    controller.observed("MODIFIED", store.objects[body["metadata"]["name"]])
    await asyncio.sleep(0.1)
    assert len(store.writes) == 1


async def test_a_review_is_opened_as_the_operator(
    store: Store, controller: ReviewsController
) -> None:
    manifest = review("r-3")
    del manifest["metadata"]["annotations"]
    opened = await controller.open(manifest)
    assert opened is not None
    assert opened["metadata"]["annotations"][CREATED_BY_ANNOTATION] == OPERATOR
    # Opened again (a crash before the Run's status said so): the operator's own is used.
    assert await controller.open(manifest) == opened


async def test_a_review_created_by_someone_else_under_the_expected_name_is_never_adopted(
    store: Store, controller: ReviewsController
) -> None:
    forged = review("r-4")
    forged["metadata"]["annotations"] = {CREATED_BY_ANNOTATION: "eve"}
    store.objects["r-4"] = forged
    manifest = review("r-4")
    with pytest.raises(trust.Refused) as refused:
        await controller.open(manifest)
    assert refused.value.reason == REASON_TAMPERED_OBJECT
    assert "Review r-4" in refused.value.message and "created by eve" in refused.value.message
    # Without the annotation at all (created before the policy, or by hand): the same.
    del store.objects["r-4"]["metadata"]["annotations"]
    with pytest.raises(trust.Refused, match="Review r-4"):
        await controller.adopt(store.objects["r-4"])
    assert store.attempts == 0  # nothing was written to it


def _gateway_pod(name: str, agent: str, owner: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {GATEWAY_LABEL: agent},
            "ownerReferences": [{"kind": "ReplicaSet", "name": owner, "controller": True}],
        },
        "status": {"phase": "Running"},
    }


def _ask_line(agent: str, n: int = 1) -> str:
    session = GatewaySessionRef(agent=agent, correlation_id="6f1c2d3e-aaaa", identity="alice")
    request = ReviewRequest(
        kind="approval",
        question="skill ship is strict. Approve this call?",
        gateway_session=session,
        tool="ship",
        deadline=datetime.now(UTC) + timedelta(seconds=60),
    )
    return GatewayReviewAsk(n=n, request=request).line()


async def test_an_ask_on_a_gateway_pods_log_is_opened_by_the_operator_once(
    store: Store, controller: ReviewsController, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = {"coder": {"metadata": {"uid": "uid-coder"}, "spec": {"gateway": {"enabled": True}}}}
    get_review = store.get_custom

    async def get_custom(plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        if plural == "agents":
            return agents.get(name)
        return await get_review(plural, namespace, name)

    monkeypatch.setattr(reviews.k8s, "get_custom", get_custom)
    asks = controller.asks
    asks.pods[(NS, "gw-coder-7d9f-x2x")] = _gateway_pod(
        "gw-coder-7d9f-x2x", "coder", "gw-coder-7d9f"
    )
    # An editor's own pod labelled as the gateway but run by nothing of the gateway's.
    asks.pods[(NS, "eves-pod")] = _gateway_pod("eves-pod", "coder", "eves-rs")

    await asks.asked(NS, "eves-pod", _ask_line("coder"))
    await asks.asked(NS, "gw-coder-7d9f-x2x", _ask_line("billing"))  # not its agent
    await asks.asked(NS, "gw-coder-7d9f-x2x", '{"event": "tool.call"}')  # an audit line
    await asyncio.sleep(0.2)
    assert store.objects == {}

    await asks.asked(NS, "gw-coder-7d9f-x2x", _ask_line("coder"))
    await asks.asked(NS, "gw-coder-7d9f-x2x", _ask_line("coder"))  # a reconnect re-reads it
    await eventually(lambda: "gw-coder-6f1c2d3e-1" in store.objects)
    opened = store.objects["gw-coder-6f1c2d3e-1"]
    assert opened["metadata"]["annotations"][CREATED_BY_ANNOTATION] == OPERATOR
    assert opened["metadata"]["ownerReferences"][0]["uid"] == "uid-coder"
    assert opened["spec"]["request"]["gatewaySession"]["agent"] == "coder"
    assert len(store.objects) == 1
