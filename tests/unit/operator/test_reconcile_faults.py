"""A reconcile that fails because of what its object holds is that object's condition, not a
retry loop, and every other object goes on (issue 47 items 1, 2). The reconcilers are
stand-ins; the controller, its queue and its workers are the real ones. The status write is
recorded instead of applied (its own path is covered by the integration tests)."""

from __future__ import annotations

import asyncio
from typing import Any

from swarmkit_api.conditions import ACCEPTED, READY, REASON_DEPTH_EXCEEDED, REASON_INVALID
from swarmkit_operator.builders import Verdict
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.indexes import IndexId
from swarmkit_operator.reconcile.controller import Controller, ControllerSettings
from swarmkit_operator.reconcile.status import StatusOf


def view(uid: str, too_deep: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"uid": uid, "generation": 3, "status": {"contentHash": "h"}, "tooDeep": too_deep}


class Recorded:
    def __init__(self) -> None:
        self.writes: list[tuple[str, str, list[Verdict], dict[str, Any]]] = []

    async def __call__(
        self, target: StatusOf, fields: Any, verdicts: Any, manager: str = ""
    ) -> bool:
        self.writes.append((target.namespace, target.name, list(verdicts), dict(fields)))
        return True


def controller(
    reconcile: Any, views: dict[tuple[str, str], dict[str, Any]]
) -> tuple[Controller, Recorded]:
    ctl = Controller(
        config=OperatorConfig(), settings=ControllerSettings(workers=2, resync_seconds=0)
    )
    ctl.reconcilers = {"Skill": reconcile}
    ctl.indexes.data[IndexId.SKILL_VIEWS] = {}  # the kind's index exists; its views are below
    recorded = Recorded()
    ctl.lookup = lambda index, key: views.get(key) if index == IndexId.SKILL_VIEWS else None  # type: ignore[method-assign]
    ctl.write_status = recorded  # type: ignore[method-assign]
    return ctl, recorded


async def test_a_builder_that_cannot_serialize_ends_in_a_condition_and_the_canary_goes_on() -> None:
    attempts: dict[str, int] = {}

    async def reconcile(ctl: Controller, namespace: str, name: str, force: bool) -> str:
        attempts[name] = attempts.get(name, 0) + 1
        if name == "poison":
            raise ValueError("Maximum serialization depth exceeded")
        return "changed"

    views = {("team-a", "poison"): view("p"), ("team-b", "canary"): view("c")}
    ctl, recorded = controller(reconcile, views)
    await ctl.start()
    try:
        ctl.enqueue("Skill", "team-a", "poison")
        ctl.enqueue("Skill", "team-b", "canary")
        await asyncio.sleep(2.0)  # four retries' worth of the usual backoff (0.5, 1, 2 s)
    finally:
        await ctl.stop()
    assert attempts == {"poison": 1, "canary": 1}
    [(namespace, name, verdicts, fields)] = recorded.writes
    assert (namespace, name) == ("team-a", "poison")
    by_type = {v.type: v for v in verdicts}
    assert by_type[ACCEPTED].status == "False"
    assert by_type[ACCEPTED].reason == REASON_DEPTH_EXCEEDED
    assert "Maximum serialization depth exceeded" in by_type[ACCEPTED].message
    assert by_type[READY].status == "False"
    assert fields == {"contentHash": "h"}  # what it showed before stays


async def test_an_invalid_value_is_reported_as_invalid() -> None:
    async def reconcile(ctl: Controller, namespace: str, name: str, force: bool) -> str:
        raise ValueError("spec.outputs: not a JSON Schema")

    ctl, recorded = controller(reconcile, {("ns", "bad"): view("b")})
    await ctl.start()
    try:
        ctl.enqueue("Skill", "ns", "bad")
        await asyncio.sleep(0.3)
    finally:
        await ctl.stop()
    [(_, _, verdicts, _)] = recorded.writes
    assert verdicts[0].reason == REASON_INVALID and "spec.outputs" in verdicts[0].message


async def test_a_failure_that_is_not_the_objects_stays_a_retry_without_a_condition() -> None:
    attempts = 0

    async def reconcile(ctl: Controller, namespace: str, name: str, force: bool) -> str:
        nonlocal attempts
        attempts += 1
        raise ConnectionError("the apiserver is restarting")

    ctl, recorded = controller(reconcile, {("ns", "fine"): view("f")})
    await ctl.start()
    try:
        ctl.enqueue("Skill", "ns", "fine")
        await asyncio.sleep(1.2)
    finally:
        await ctl.stop()
    assert recorded.writes == [] and attempts >= 2


async def test_an_object_cut_when_decoded_is_reported_and_never_reconciled() -> None:
    called: list[str] = []

    async def reconcile(ctl: Controller, namespace: str, name: str, force: bool) -> str:
        called.append(name)
        return "changed"

    views = {
        ("team-a", "poison"): view("p", ("spec.outputs.properties.a.properties.a",)),
        ("team-b", "canary"): view("c"),
    }
    ctl, recorded = controller(reconcile, views)
    await ctl.start()
    try:
        ctl.enqueue("Skill", "team-a", "poison")
        ctl.enqueue("Skill", "team-b", "canary")
        await asyncio.sleep(0.3)
    finally:
        await ctl.stop()
    assert called == ["canary"]
    [(_, name, verdicts, _)] = recorded.writes
    assert name == "poison"
    assert verdicts[0].reason == REASON_DEPTH_EXCEEDED
    assert verdicts[0].message.startswith("spec.outputs.properties.a")
