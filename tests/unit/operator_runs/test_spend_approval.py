"""The operator's check of an approve_spend effect (pure rules) and the child's lookup of it.

The runner is not trusted: the operator refuses an approval unless the agent is one of the
approving Run's own agents, its Agent holds ``approve_spend``, and the held Run is one the
approving Run's own effects created (named in its status and labelled with its uid).
"""

from __future__ import annotations

from typing import Any

from swarmkit_operator.runs import spend_approval as sa
from swarmkit_operator.runs.model import RunView

PARENT_UID = "11111111-2222-3333-4444-555555555555"
CHILD = "boss-11111111-fx0"
STARTED = [
    {"seq": 0, "kind": "schedule", "to": "work", "state": "Materialized", "object": f"Run/{CHILD}"},
    {"seq": 1, "kind": "mailbox_send", "to": "ops", "state": "Materialized",
     "object": "MailboxMessage/boss-11111111-fx1"},
    {"seq": 2, "kind": "agent_message", "to": "x", "state": "Failed", "object": None},
]  # fmt: skip


def _refusal(**over: Any) -> str | None:
    args: dict[str, Any] = {
        "run_name": "boss",
        "run_uid": PARENT_UID,
        "agent": "boss",
        "agent_object": "boss",
        "permissions": ["schedule", "approve_spend"],
        "target": CHILD,
        "target_labels": {"swarmkit.dev/effect-of": PARENT_UID},
        "started": sa.started_runs(STARTED),
        **over,
    }
    return sa.refusal(**args)


def test_started_runs_are_the_materialized_runs_of_schedule_and_agent_message() -> None:
    assert sa.started_runs(STARTED) == {CHILD}


def test_an_approval_passes_only_for_a_permitted_agent_of_the_run_and_its_own_child() -> None:
    assert _refusal() is None
    assert _refusal(agent_object=None, agent="intruder") == (
        "agent intruder is not an agent of Run boss"
    )
    assert _refusal(permissions=None) == "Agent boss no longer exists"
    assert _refusal(permissions=["schedule"]) == (
        "Agent boss does not hold the approve_spend permission"
    )
    assert _refusal(target="by-hand", target_labels=None) == "Run by-hand does not exist"
    not_mine = (
        "Run {} was not started by Run boss (only the Runs its schedule and agent_message "
        "effects created)"
    )
    # A Run a person created, labelled to look like the child: not in the parent's effects.
    forged = {"swarmkit.dev/effect-of": PARENT_UID}
    assert _refusal(target="by-hand", target_labels=forged) == not_mine.format("by-hand")
    # The child's name, but not carrying the parent's uid (another object of that name).
    assert _refusal(target_labels={}) == not_mine.format(CHILD)
    # The mailbox item of the same Run is not a Run it started.
    assert _refusal(target="boss-11111111-fx1") == not_mine.format("boss-11111111-fx1")


def test_run_agent_is_the_agent_ref_or_a_node_of_the_topology() -> None:
    assert sa.run_agent({"agentRef": {"name": "boss"}}, None, "boss") == "boss"
    assert sa.run_agent({"agentRef": {"name": "boss"}}, None, "other") is None
    topo = {"spec": {"agents": [{"name": "root", "agentRef": {"name": "lead-agent"}}]}}
    spec = {"topologyRef": {"name": "t"}}
    assert sa.run_agent(spec, topo, "root") == "lead-agent"
    assert sa.run_agent(spec, topo, "lead-agent") == "lead-agent"
    assert sa.run_agent(spec, topo, "helper") is None
    assert sa.run_agent(spec, None, "root") is None


class _State:
    def __init__(self, runs: list[RunView]) -> None:
        self.runs = {r.uid: r for r in runs}
        self.idx = type("Idx", (), {"topologies": {}})()

    def run_view(self, uid: str) -> RunView | None:
        return self.runs.get(uid)


def _run(name: str, uid: str, labels: dict[str, str], effects: list[dict[str, Any]]) -> RunView:
    return RunView(
        name=name,
        namespace="team-a",
        uid=uid,
        generation=1,
        spec={"agentRef": {"name": "boss"}},
        status={"effects": effects},
        labels=labels,
        deleting=False,
        resource_version=1,
    )


def test_the_held_child_finds_its_parents_approval_and_nobody_elses() -> None:
    approved = {
        "seq": 3, "kind": "approve_spend", "agent": "boss", "to": CHILD,
        "state": "Materialized", "object": f"Run/{CHILD}", "uid": "c-uid",
    }  # fmt: skip
    refused = {**approved, "state": "Failed", "object": None}
    parent = _run("boss", PARENT_UID, {}, [*STARTED, approved])
    child = _run(CHILD, "c-uid", {"swarmkit.dev/effect-of": PARENT_UID}, [])
    st: Any = _State([parent, child])
    assert sa.approver(st, child) == ("agent:team-a/boss", "boss")
    # No parent label, or a parent whose approval was refused: nothing to take up.
    assert sa.approver(st, _run(CHILD, "c-uid", {}, [])) is None
    st_refused: Any = _State([_run("boss", PARENT_UID, {}, [*STARTED, refused]), child])
    assert sa.approver(st_refused, child) is None
    # The same name, another Run (the approved one was deleted and a Run created again).
    again = _run(CHILD, "another-uid", {"swarmkit.dev/effect-of": PARENT_UID}, [])
    assert sa.approver(st, again) is None
    # The parent approved a different Run: not this one.
    other = _run("other", "o-uid", {"swarmkit.dev/effect-of": PARENT_UID}, [])
    assert sa.approver(st, other) is None
