"""How many status writes a Skill costs (issue 43: "one status patch per Skill").

One, when what its status says is known at its first reconcile (its granting Agents are
there), and none when a resync finds nothing changed. (Agents granting it that arrive after
that write change ``grantedBy``: a ``SkillGrants`` write, enqueued by the skill library's
Agent events, pinned down in ``test_skill_grants.py``; docs/design/scale.md.)
"""

from __future__ import annotations

from swarmkit_api.conditions import READY
from tests.support.fake_k8s import FakeApi
from tests.support.reconciling import Reconciling

from .reconcile_cases import NS, WORKSPACE, condition, skill_spec, status


def skill_status_writes(api: FakeApi, name: str) -> int:
    return sum(1 for _, path in api.writes() if path.endswith(f"/skills/{name}/status"))


async def test_a_skill_whose_agents_exist_takes_one_status_write(
    api: FakeApi, operator: Reconciling
) -> None:
    api.apply_spec("Workspace", NS, "default", WORKSPACE)
    for i in range(3):
        api.apply_spec("Agent", NS, f"a{i}", {"skills": ["s"]})
    await operator.settle()
    api.apply_spec("Skill", NS, "s", skill_spec(instructions="# S\n"))
    await operator.settle()
    assert condition(api, "Skill", "s", READY)["status"] == "True"
    assert status(api, "Skill", "s")["grantedBy"]["count"] == 3
    assert skill_status_writes(api, "s") == 1

    # A resync (every object enqueued again) finds nothing to write.
    assert operator.ctl is not None
    await operator.ctl.resync()
    await operator.settle()
    assert skill_status_writes(api, "s") == 1
