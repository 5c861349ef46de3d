"""One status write per Skill in a bulk apply (issue 43; ``reconcile/parking.py``).

A library applied as ``kubectl apply -f dir/`` creates every Skill, then the Agents granting
them. A Skill written at once says ``grantedBy: 0`` and is written again when its Agents
arrive; held while the apply is arriving, it is written once, with them. A Skill created by
hand is written at once, and a held Skill's render is neither waited for by the Agents
granting it nor collected as garbage.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from swarmkit_api.conditions import READY
from swarmkit_operator.reconcile import gc, parking
from tests.support.fake_k8s import FakeApi
from tests.support.reconciling import Reconciling

from .reconcile_cases import NS, WORKSPACE, condition, skill_spec, status

SKILLS, AGENTS = 40, 20


def skill_status_writes(api: FakeApi, name: str) -> int:
    return sum(1 for _, path in api.writes() if path.endswith(f"/skills/{name}/status"))


def grants(a: int) -> list[str]:
    return [f"s{2 * a}", f"s{2 * a + 1}"]


@pytest.fixture(autouse=True)
def quick_bursts(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same rule on a shorter clock: 20 new Skills and Agents within 0.4 s.
    monkeypatch.setattr(parking, "BURST_SECONDS", 0.4)


async def test_a_library_applied_skills_first_takes_one_status_write_per_skill(
    api: FakeApi, operator: Reconciling
) -> None:
    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    await operator.settle()
    for i in range(SKILLS):
        api.apply_spec("Skill", NS, f"s{i}", skill_spec(instructions=f"# S{i}\n"))
    # The Skills' reconciles run (and render) before the first Agent arrives.
    await asyncio.sleep(0.2)
    assert operator.ctl is not None
    assert operator.ctl.book.held, "no Skill's first write was held"
    for a in range(AGENTS):
        api.apply_spec("Agent", NS, f"a{a}", {"skills": grants(a)})
    await operator.settle()

    for a in range(AGENTS):
        assert condition(api, "Agent", f"a{a}", READY)["status"] == "True"
        for skill in grants(a):
            assert condition(api, "Skill", skill, READY)["status"] == "True"
            assert status(api, "Skill", skill)["grantedBy"] == {"count": 1, "agents": [f"a{a}"]}
            assert skill_status_writes(api, skill) == 1, skill
    assert operator.ctl.book.held == {}


async def test_a_skill_created_by_hand_is_written_at_once(
    api: FakeApi, operator: Reconciling, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parking, "BURST_SECONDS", 30.0)  # a hold would outlast the wait
    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    api.apply_spec("Agent", NS, "a", {"skills": ["s"]})
    await operator.settle()
    started = time.monotonic()
    api.apply_spec("Skill", NS, "s", skill_spec(instructions="# S\n"))
    await operator.settle(timeout=10.0)
    assert time.monotonic() - started < 10.0
    assert condition(api, "Skill", "s", READY)["status"] == "True"
    assert status(api, "Skill", "s")["grantedBy"] == {"count": 1, "agents": ["a"]}
    assert skill_status_writes(api, "s") == 1


async def test_a_held_skills_render_is_not_collected(
    api: FakeApi, operator: Reconciling, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parking, "BURST_SECONDS", 30.0)  # held for the whole test
    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    for i in range(SKILLS):
        api.apply_spec("Skill", NS, f"s{i}", skill_spec(instructions=f"# S{i}\n"))
    ctl = operator.ctl
    assert ctl is not None
    deadline = time.monotonic() + 10.0
    while len(ctl.book.held) < SKILLS and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    renders = {str(h.fields["renderedConfigMap"]) for h in ctl.book.held.values()}
    assert len(renders) == SKILLS
    while any(api.get("ConfigMap", NS, r) is None for r in renders):
        assert time.monotonic() < deadline, "the held renders were never created"
        await asyncio.sleep(0.05)
    # Long after they were created (the collection's in-flight window is a minute).
    for ident in list(ctl.renders.created):
        ctl.renders.created[ident] -= 600.0
    await gc.collect_garbage(ctl, NS, "", False)
    assert all(api.get("ConfigMap", NS, r) is not None for r in renders)
    assert all(not status(api, "Skill", f"s{i}") for i in range(SKILLS))  # nothing written
