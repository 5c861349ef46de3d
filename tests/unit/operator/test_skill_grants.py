"""A Skill's ``status.grantedBy`` after Agents granting it arrive while it reconciles.

The race this pins down: a Skill created just before the Agents that grant it computes
grantedBy (0 agents) in its first reconcile; the Agents' events enqueue a ``SkillGrants``
reconcile while that write is still on its way. The grants reconcile must wait for the
write and then correct it, not give up because the Skill has no observedGeneration yet
(that left ``grantedBy.count: 0`` for good, and the next operator rewrote it at start-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from swarmkit_operator import k8s
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.handlers.root import wiring
from swarmkit_operator.handlers.skill import reconcile_skill_grants
from swarmkit_operator.reconcile.controller import Deferred

WIRED = wiring()

NS = "ns"


def skill(status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"uid": "skill-uid", "name": "s", "namespace": NS, "generation": 1},
        "spec": {"instructions": "# s\n"},
        "status": dict(status or {}),
    }


def agent(name: str) -> dict[str, Any]:
    return {
        "metadata": {"uid": f"{name}-uid", "name": name, "namespace": NS, "generation": 1},
        "spec": {"skills": ["s"]},
    }


@pytest.fixture
def patches(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def apply_status(
        kind: str, plural: str, namespace: str, name: str, body: Mapping[str, Any], manager: str
    ) -> dict[str, Any]:
        # grantedBy alone, as its own field manager (the Skill reconcile applies the rest)
        assert manager == k8s.SKILL_GRANTS_MANAGER
        sent.append({"plural": plural, "name": name, **body})
        return {"metadata": {"resourceVersion": str(len(sent))}, "status": dict(body)}

    monkeypatch.setattr(k8s, "apply_status", apply_status)
    return sent


async def test_grants_wait_for_the_first_reconcile_write_then_correct_it(
    patches: list[dict[str, Any]],
) -> None:
    ctl = WIRED.controller(OperatorConfig())
    key = ("Skill", NS, "s")
    ctl.indexes.update("skills", skill())
    ctl.indexes.update("agents", agent("a1"))
    # The Skill's first reconcile has written grantedBy 0 and the watch has not shown it.
    ctl.book.awaiting[key] = ("", 1e18, {"grantedBy": {"count": 0, "agents": []}})
    with pytest.raises(Deferred) as deferred:
        await reconcile_skill_grants(ctl, NS, "s", False)
    assert deferred.value.keys == [key]
    assert patches == []

    # The echo arrives: the Skill shows its first status, with the stale count.
    echoed = skill({"observedGeneration": 1, "grantedBy": {"count": 0, "agents": []}})
    ctl.indexes.update("skills", echoed)
    ctl.observed(key, echoed)
    assert await reconcile_skill_grants(ctl, NS, "s", False) == "changed"
    assert [p["grantedBy"] for p in patches] == [{"count": 1, "agents": ["a1"]}]


async def test_grants_wait_while_the_skill_reconcile_is_queued_or_running(
    patches: list[dict[str, Any]],
) -> None:
    ctl = WIRED.controller(OperatorConfig())
    ctl.indexes.update("skills", skill())
    ctl.queue.add(("Skill", NS, "s"))
    with pytest.raises(Deferred):
        await reconcile_skill_grants(ctl, NS, "s", False)
    assert await ctl.queue.get() == ("Skill", NS, "s")  # now running
    with pytest.raises(Deferred):
        await reconcile_skill_grants(ctl, NS, "s", False)
    assert patches == []


async def test_a_skill_never_reconciled_is_left_to_its_own_reconcile_when_forced(
    patches: list[dict[str, Any]],
) -> None:
    ctl = WIRED.controller(OperatorConfig())
    ctl.indexes.update("skills", skill())
    assert await reconcile_skill_grants(ctl, NS, "s", True) == "gone"
    assert await reconcile_skill_grants(ctl, NS, "missing", False) == "gone"
    assert patches == []


async def test_a_settled_skill_gets_only_the_grants_written(
    patches: list[dict[str, Any]],
) -> None:
    ctl = WIRED.controller(OperatorConfig())
    settled = {"observedGeneration": 1, "grantedBy": {"count": 1, "agents": ["a1"]}}
    ctl.indexes.update("skills", skill(settled))
    ctl.indexes.update("agents", agent("a1"))
    assert await reconcile_skill_grants(ctl, NS, "s", False) == "unchanged"
    ctl.indexes.update("agents", agent("a2"))
    assert await reconcile_skill_grants(ctl, NS, "s", False) == "changed"
    assert patches[0]["grantedBy"] == {"count": 2, "agents": ["a1", "a2"]}
    # Only grantedBy (and the generation it was computed at): applied as its own field
    # manager, it must not send conditions, which would make it co-own the reconcile's.
    assert set(patches[0]) == {"plural", "name", "grantedBy", "observedGeneration"}
