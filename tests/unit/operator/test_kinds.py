"""Kinds are declared once (``Kind`` in each kind's module, listed in ``root.KINDS``).

The Funnel, the newest kind, goes through the same event function as every other: its own
status echo reconciles nothing (it used to re-enqueue itself and every Topology naming it
on every event, its own status writes included).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from swarmkit_api import GROUP, VERSION
from swarmkit_api.resources import KINDS_BY_NAME
from swarmkit_operator import k8s
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.handlers import common, root
from swarmkit_operator.indexes import IndexId
from swarmkit_operator.reconcile.controller import Controller, Kind

NS = "ns"
FUNNEL_SPEC = {
    "approve": {"roles": {"lead": ["alice"]}, "rules": [{"role": "lead", "min": 1}]},
}


def funnel(rv: str, generation: int = 1, status: Mapping[str, Any] | None = None) -> Any:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Funnel",
        "metadata": {
            "uid": "funnel-uid",
            "name": "f",
            "namespace": NS,
            "generation": generation,
            "resourceVersion": rv,
        },
        "spec": FUNNEL_SPEC,
        "status": dict(status or {}),
    }


def topology() -> dict[str, Any]:
    return {
        "metadata": {"uid": "topo-uid", "name": "t", "namespace": NS, "generation": 1},
        "spec": {"agents": [{"name": "a", "agentRef": {"name": "a"}, "funnel": {"name": "f"}}]},
    }


@pytest.fixture
def applied(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def apply_status(
        kind: str, plural: str, namespace: str, name: str, body: Mapping[str, Any], manager: str
    ) -> dict[str, Any]:
        sent.append(dict(body))
        return {"metadata": {"resourceVersion": str(10 + len(sent))}, "status": dict(body)}

    monkeypatch.setattr(k8s, "apply_status", apply_status)
    return sent


async def queued(ctl: Controller) -> list[tuple[str, str, str]]:
    keys = []
    while len(ctl.queue):
        key = await ctl.queue.get()
        ctl.queue.done(key)
        keys.append(key)
    return keys


async def test_a_funnels_own_status_echo_reconciles_nothing(applied: list[dict[str, Any]]) -> None:
    wired = root.wiring()
    ctl = wired.controller(OperatorConfig())
    app = SimpleNamespace(controller=ctl)
    dispatch = wired.events.dispatcher(GROUP, VERSION, "funnels")
    assert dispatch is not None
    ctl.indexes.update("topologies", topology())
    reconciles: list[tuple[str, str, str]] = []

    async def event(type_: str | None, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        await dispatch(
            type=type_, body=body, namespace=meta["namespace"], name=meta["name"],
            uid=meta["uid"], labels={}, spec=body["spec"], status=body["status"], app=app,
        )  # fmt: skip

    async def run_queue() -> list[tuple[str, str, str]]:
        keys = await queued(ctl)
        for key in keys:
            if key[0] == "Funnel":
                reconciles.append(key)
                await ctl._process(key)
        return keys

    # Created: reconciled once, which writes its status.
    await event("ADDED", funnel("1"))
    assert await run_queue() == [("Funnel", NS, "f")]
    assert len(applied) == 1 and applied[0]["observedGeneration"] == 1
    # The echo of that write: nothing of the Funnel's to do; the Topology naming it
    # hears of its version once (what it reads of the Funnel changed).
    await event("MODIFIED", funnel("11", status=applied[0]))
    assert await run_queue() == [("Topology", NS, "t")]
    # The same status again (a re-list, a label edit): nothing at all.
    await event("MODIFIED", funnel("12", status=applied[0]))
    assert await run_queue() == []
    assert reconciles == [("Funnel", NS, "f")]
    assert len(applied) == 1
    # A spec edit (a new generation) is reconciled, as for every kind.
    await event("MODIFIED", funnel("13", generation=2, status=applied[0]))
    assert await run_queue() == [("Funnel", NS, "f")]
    assert reconciles == [("Funnel", NS, "f"), ("Funnel", NS, "f")]


async def test_an_evalsets_readiness_wakes_the_evalruns_waiting_for_it() -> None:
    """The EvalRun's declaration watches the EvalSet it runs (``evalrun_by_set``); the
    EvalSet declares no fan-out of its own."""
    wired = root.wiring()
    ctl = wired.controller(OperatorConfig())
    app = SimpleNamespace(controller=ctl)
    dispatch = wired.events.dispatcher(GROUP, VERSION, "evalsets")
    assert dispatch is not None
    waiting = {
        "metadata": {"uid": "run-uid", "name": "run", "namespace": NS, "generation": 1},
        "spec": {"evalSetRef": {"name": "cases"}},
    }
    ctl.indexes.update("evalruns", waiting)

    async def event(rv: str, status: dict[str, Any]) -> None:
        meta = {"uid": "set-uid", "name": "cases", "namespace": NS, "generation": 1}
        body = {"metadata": {**meta, "resourceVersion": rv}, "spec": {}, "status": status}
        await dispatch(
            type="MODIFIED", body=body, namespace=NS, name="cases", uid="set-uid", labels={},
            spec={}, status=status, app=app,
        )  # fmt: skip

    async def runs_queued() -> list[tuple[str, str, str]]:
        return [key for key in await queued(ctl) if key[0] == "EvalRun"]

    ready = {"type": "Ready", "status": "True", "reason": "Valid"}
    await event("1", {"observedGeneration": 1, "version": "v1", "conditions": [ready]})
    assert await runs_queued() == [("EvalRun", NS, "run")]
    # The same version and readiness again: nothing for the EvalRun.
    await event("2", {"observedGeneration": 1, "version": "v1", "conditions": [ready]})
    assert await runs_queued() == []
    # A new version: the EvalRun hears of it.
    await event("3", {"observedGeneration": 1, "version": "v2", "conditions": [ready]})
    assert await runs_queued() == [("EvalRun", NS, "run")]


async def test_a_workspaces_new_render_wakes_the_agents_and_topologies_using_it() -> None:
    """The Agent's and the Topology's declarations watch their Workspace
    (``agent_by_workspace``, ``topology_by_workspace``); the Workspace's own ``dependents``
    only collects its old render."""
    wired = root.wiring()
    ctl = wired.controller(OperatorConfig())
    app = SimpleNamespace(controller=ctl)
    dispatch = wired.events.dispatcher(GROUP, VERSION, "workspaces")
    assert dispatch is not None
    user = {"workspaceRef": {"name": "ws"}}
    meta = {"namespace": NS, "generation": 1}
    ctl.indexes.update("agents", {"metadata": {**meta, "uid": "a", "name": "a"}, "spec": user})
    ctl.indexes.update(
        "topologies",
        {"metadata": {**meta, "uid": "t", "name": "t"}, "spec": {**user, "agents": []}},
    )
    ctl.indexes.update(
        "agents",
        {
            "metadata": {**meta, "uid": "o", "name": "other"},
            "spec": {"workspaceRef": {"name": "x"}},
        },
    )

    async def event(rv: str, status: dict[str, Any]) -> None:
        body = {
            "metadata": {**meta, "uid": "ws-uid", "name": "ws", "resourceVersion": rv},
            "spec": {},
            "status": status,
        }
        await dispatch(
            type="MODIFIED", body=body, namespace=NS, name="ws", uid="ws-uid", labels={},
            spec={}, status=status, app=app,
        )  # fmt: skip

    async def woken() -> list[tuple[str, str, str]]:
        gc = ("GC", NS, "")
        if ctl.queue.pending(gc):
            ctl.queue.add(gc)  # due now: its grace period is not what this test is about
        return sorted(key for key in await queued(ctl) if key[0] != "Workspace")

    def rendered(config_map: str) -> dict[str, Any]:
        ready = {"type": "Ready", "status": "True", "reason": "Rendered"}
        return {"observedGeneration": 1, "renderedConfigMap": config_map, "conditions": [ready]}

    await event("1", rendered("ws-1"))
    assert await woken() == [
        ("Agent", NS, "a"), ("GC", NS, ""), ("Topology", NS, "t")
    ]  # fmt: skip
    await event("2", rendered("ws-1"))  # its own status echo: nothing
    assert await woken() == []
    await event("3", rendered("ws-2"))
    assert await woken() == [
        ("Agent", NS, "a"), ("GC", NS, ""), ("Topology", NS, "t")
    ]  # fmt: skip


def test_every_kind_is_declared_once_and_the_tables_come_from_the_declarations() -> None:
    wired = root.wiring()
    kinds = wired.kinds
    assert list(kinds) == [
        "Workspace",
        "Skill",
        "SkillGrants",
        "Agent",
        "Funnel",
        "Topology",
        "EvalSet",
        "EvalRun",
        "GC",
    ]
    for kind in kinds.values():
        assert isinstance(kind, Kind)
        if kind.api is not None:
            assert KINDS_BY_NAME[kind.kind].plural == kind.plural
            # Its first declared index is its views index; every declared one is wired.
            assert kind.view_index == f"{kind.kind.lower()}_views"
            ids = {s.id for s in wired.index_specs}
            assert kind.view_index in ids
            # One function on its stream, ahead of the other modules' functions.
            first = wired.events.registered(GROUP, VERSION, kind.plural)[0]
            assert first.__name__ == f"{kind.kind.lower()}_event"
    # Lanes: inputs before dependents, garbage collection last.
    lanes = wired.priority
    assert lanes["Workspace"] < lanes["Skill"] < lanes["Agent"] < lanes["Topology"] < lanes["GC"]
    assert lanes["Funnel"] < lanes["Topology"]
    assert lanes["Agent"] < lanes["EvalSet"] < lanes["GC"] and lanes["EvalRun"] < lanes["GC"]
    # The funnels' stream is a kind's now: no generic index keeper in front of it.
    assert common.index_event not in wired.events.registered(GROUP, VERSION, "funnels")


def test_a_declaration_whose_index_is_over_another_resource_is_refused() -> None:
    from swarmkit_operator.handlers import funnel, topology

    wrong = Kind(
        "Funnel",
        priority=2,
        reconcile=funnel.reconcile_funnel,
        api=KINDS_BY_NAME["Funnel"],
        indexes=(funnel.funnel_views, topology.topology_views),
    )
    with pytest.raises(RuntimeError, match="every declared index"):
        root.wiring(kinds=(wrong,))
    with pytest.raises(RuntimeError, match="two declarations"):
        root.wiring(kinds=(funnel.KIND, funnel.KIND))


def test_what_wakes_a_funnel_is_declared_on_the_funnel_and_needs_a_declared_source() -> None:
    from swarmkit_operator.handlers import agent, funnel, topology
    from swarmkit_operator.handlers.evaluation import EVAL_RUN_KIND, EVAL_SET_KIND

    # The Funnel says it watches Skills; the Skill's declaration names no Funnel.
    assert [(w.source, w.index) for w in funnel.KIND.watches] == [
        ("Skill", IndexId.FUNNEL_BY_JUDGE)
    ]
    # Every fan-out along an index is a watch on the kind it wakes (the Topologies naming a
    # Funnel, the EvalSets judging with a Skill or an Agent, the EvalRuns of an EvalSet, the
    # Agents and Topologies using a Workspace).
    assert root._watchers(root.wiring().kinds) == {
        "Skill": [("Funnel", funnel.KIND.watches[0]), ("EvalSet", EVAL_SET_KIND.watches[0])],
        "Agent": [("EvalSet", EVAL_SET_KIND.watches[1])],
        "Funnel": [("Topology", topology.KIND.watches[0])],
        "EvalSet": [("EvalRun", EVAL_RUN_KIND.watches[0])],
        "Workspace": [("Agent", agent.KIND.watches[0]), ("Topology", topology.KIND.watches[1])],
    }
    assert funnel.KIND.dependents is None and EVAL_SET_KIND.dependents is None
    # A watch of a kind the operator does not declare is a start-up error, not a silent no-op.
    with pytest.raises(RuntimeError, match="Funnel watches Skill: no such kind"):
        root.wiring(kinds=(funnel.KIND,))
