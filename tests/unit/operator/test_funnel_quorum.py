"""The quorum of a funnel approval (pure) and a Topology's funnel checks (pure builders)."""

from __future__ import annotations

from typing import Any

import pytest

from swarmkit_api.conditions import REASON_FUNNEL_INVALID, REASON_FUNNEL_NOT_FOUND
from swarmkit_api.funnel import Approval, ApproveLayer
from swarmkit_api.quorum import tally
from swarmkit_api.topology import TopologySpec
from swarmkit_operator.builders.funnel import (
    check_funnels,
    funnel_version,
    parse_funnel,
    unreachable,
)
from swarmkit_operator.runs.funnel_gate import decision

ROLES = {
    "security": {"users": ["sam", "pat"]},
    "product": {"groups": ["pm"]},
    "leads": {"groups": ["leads"]},
}


def policy(*rules: dict[str, Any], **kw: Any) -> ApproveLayer:
    return ApproveLayer.model_validate({"rules": list(rules), "roles": ROLES, **kw})


def sig(who: str, role: str, verdict: str = "approve") -> Approval:
    return Approval(verdict=verdict, role=role, decided_by=who)  # type: ignore[arg-type]


def test_all_needs_every_role_of_the_rule() -> None:
    p = policy({"roles": ["security", "product"], "quorum": "all"})
    half = tally(p, [sig("sam", "security")], author=None)
    assert not half.approved
    assert half.missing == ["rule 1 (all of security, product): waiting for product"]
    full = tally(p, [sig("sam", "security"), sig("paula", "product")], author=None)
    assert full.approved and full.approvers == ("sam", "paula")


def test_any_needs_one_role() -> None:
    p = policy({"roles": ["security", "product"], "quorum": "any"})
    assert not tally(p, [], author=None).approved
    assert tally(p, [sig("paula", "product")], author=None).approved


def test_k_of_counts_distinct_people_not_signatures() -> None:
    p = policy({"roles": ["leads"], "kOf": 2})
    one = tally(p, [sig("ann", "leads"), sig("ann", "leads")], author=None)
    assert not one.approved
    assert one.missing == ["rule 1 (2 of leads): 1 more distinct signer(s)"]
    # two users of one group
    assert tally(p, [sig("ann", "leads"), sig("ben", "leads")], author=None).approved


def test_every_rule_must_hold() -> None:
    p = policy({"roles": ["security"], "quorum": "any"}, {"roles": ["leads"], "kOf": 2})
    t = tally(p, [sig("sam", "security"), sig("ann", "leads")], author=None)
    assert not t.approved and [r.satisfied for r in t.rules] == [True, False]


def test_one_person_in_two_roles_counts_once_for_min_distinct() -> None:
    p = policy(
        {"roles": ["security"], "quorum": "any"},
        {"roles": ["product"], "quorum": "any"},
        minDistinctApprovers=2,
    )
    both_hats = [sig("sam", "security"), sig("sam", "product")]
    t = tally(p, both_hats, author=None)
    assert all(r.satisfied for r in t.rules), "each rule has its signature"
    assert not t.approved and t.approvers == ("sam",)
    assert t.missing == ["minDistinctApprovers: 1 of 2 distinct people signed"]
    assert tally(p, [sig("sam", "security"), sig("paula", "product")], author=None).approved


def test_exclude_author_ignores_the_creator() -> None:
    p = policy({"roles": ["leads"], "kOf": 2})
    sigs = [sig("carol", "leads"), sig("ann", "leads")]
    t = tally(p, sigs, author="carol")
    assert not t.approved and t.ignored == ("carol: created the run (excludeAuthor)",)
    lax = policy({"roles": ["leads"], "kOf": 2}, excludeAuthor=False)
    assert tally(lax, sigs, author="carol").approved


def test_a_rejection_rejects_and_unknown_roles_do_not_count() -> None:
    p = policy({"roles": ["leads"], "quorum": "any"})
    t = tally(p, [sig("ann", "leads"), sig("ben", "leads", "reject")], author=None)
    assert not t.approved and t.rejected_by == "ben"
    ghost = tally(p, [sig("zed", "admins")], author=None)
    assert not ghost.approved and ghost.ignored == ("zed: unknown role admins",)


def _review(approvals: list[dict[str, Any]], author: str = "carol") -> dict[str, Any]:
    gate = {
        "funnel": "notes",
        "approve": {"rules": [{"roles": ["leads"], "kOf": 2}], "roles": ROLES},
        "author": author,
        "report": {"funnel": "notes", "artifact": "x"},
    }
    request = {"kind": "funnel_approval", "question": "?", "key": "e.0.1", "gate": gate}
    return {"metadata": {"name": "r-1"}, "spec": {"request": request, "approvals": approvals}}


def test_operator_decision_from_the_signatures() -> None:
    ann = {"verdict": "approve", "role": "leads", "decidedBy": "ann"}
    ben = {"verdict": "approve", "role": "leads", "decidedBy": "ben"}
    assert decision(_review([ann])) is None
    found = decision(_review([ann, ben]))
    assert found is not None
    assert (found.verdict, found.decided_by, found.key, found.kind) == (
        "approve",
        "ann, ben",
        "e.0.1",
        "funnel_approval",
    )
    no = {"verdict": "reject", "role": "leads", "decidedBy": "ben", "text": "wrong numbers"}
    rejected = decision(_review([ann, no]))
    assert rejected is not None
    assert (rejected.verdict, rejected.decided_by, rejected.text) == (
        "reject",
        "ben",
        "wrong numbers",
    )


# --- the Topology's funnel checks --------------------------------------------------------------

FUNNEL = {
    "judge": {"skill": "judge"},
    "approve": {"rules": [{"roles": ["leads"], "kOf": 2}], "roles": ROLES},
}


def _topology() -> TopologySpec:
    return TopologySpec.model_validate(
        {
            "workspaceRef": {"name": "default"},
            "agents": [
                {
                    "name": "w",
                    "agentRef": {"name": "writer"},
                    "role": "root",
                    "funnel": {"name": "f"},
                }
            ],
        }
    )


@pytest.mark.parametrize(
    ("funnels", "grants", "reason", "message"),
    [
        ({}, ["judge"], REASON_FUNNEL_NOT_FOUND, "node w: Funnel 'f' not found"),
        (
            {"f": FUNNEL},
            [],
            REASON_FUNNEL_INVALID,
            "node w: Funnel f's judge skill 'judge' is not granted to agent writer",
        ),
        (
            {"f": {**FUNNEL, "review": {"agent": "ghost"}}},
            ["judge"],
            REASON_FUNNEL_INVALID,
            "node w: Funnel f's reviewer agent 'ghost' not found",
        ),
    ],
)
def test_topology_not_ready_names_the_funnel_problem(
    funnels: dict[str, Any], grants: list[str], reason: str, message: str
) -> None:
    check = check_funnels(_topology(), funnels, lambda a: grants, lambda a: a == "writer")
    assert check.problem is not None
    assert (check.problem.reason, check.problem.message) == (reason, message)


def test_funnel_version_changes_with_its_content() -> None:
    check = check_funnels(_topology(), {"f": FUNNEL}, lambda a: ["judge"], lambda a: True)
    assert check.problem is None
    parsed = parse_funnel(FUNNEL)
    assert not isinstance(parsed, str)
    assert check.versions == {"f": funnel_version(parsed)}
    stricter = parse_funnel({**FUNNEL, "judge": {"skill": "judge", "threshold": 0.95}})
    assert not isinstance(stricter, str)
    assert funnel_version(stricter) != funnel_version(parsed)


@pytest.mark.parametrize(
    ("approve", "why"),
    [
        (
            {"rules": [{"roles": ["sec"], "kOf": 3}], "roles": {"sec": {"users": ["a", "b"]}}},
            "approve.rules[0]: kOf 3 but its roles list only 2 user(s) and no group",
        ),
        (
            {
                "rules": [{"roles": ["sec"], "quorum": "any"}],
                "roles": {"sec": {"users": ["a"]}},
                "minDistinctApprovers": 2,
            },
            "approve.minDistinctApprovers 2 but the roles list only 1 user(s) and no group",
        ),
        # a group admits people only the authenticator knows: reachable as far as we can tell
        (
            {
                "rules": [{"roles": ["sec"], "kOf": 3}],
                "roles": {"sec": {"users": ["a"], "groups": ["g"]}},
            },
            None,
        ),
    ],
)
def test_a_quorum_no_listed_people_can_reach_is_flagged(
    approve: dict[str, Any], why: str | None
) -> None:
    parsed = parse_funnel({"approve": approve})
    assert not isinstance(parsed, str)
    assert unreachable(parsed) == why
    check = check_funnels(_topology(), {"f": {"approve": approve}}, lambda a: [], lambda a: True)
    if why is None:
        assert check.problem is None
    else:
        assert check.problem is not None and check.problem.reason == REASON_FUNNEL_INVALID
        assert check.problem.message == f"node w: Funnel f: {why}"


def test_a_judge_that_is_not_a_decision_skill_is_refused() -> None:
    check = check_funnels(
        _topology(), {"f": FUNNEL}, lambda a: ["judge"], lambda a: True, lambda s: "capability"
    )
    assert check.problem is not None and check.problem.reason == REASON_FUNNEL_INVALID
    assert check.problem.message == (
        "node w: Funnel f's judge skill 'judge' is not a decision skill (category capability)"
    )


def test_gate_status_and_metrics_follow_the_approval() -> None:
    from prometheus_client import REGISTRY

    from swarmkit_operator.runs.funnel_gate import gates_after

    review = _review([])
    review["metadata"]["namespace"] = "team-q"
    labels = {"namespace": "team-q", "funnel": "notes"}

    def count(state: str) -> float:
        value = REGISTRY.get_sample_value("swarmkit_funnel_gates_total", {**labels, "state": state})
        return value or 0.0

    opened = gates_after([], review, None)
    assert opened == [
        {"funnel": "notes", "node": "", "review": "r-1", "attempts": 1, "exhausted": False,
         "state": "AwaitingApproval"}
    ]  # fmt: skip
    settled = gates_after(opened, review, "approve")
    assert settled is not None and [g["state"] for g in settled] == ["Approved"]
    assert (count("AwaitingApproval"), count("Approved")) == (1.0, 1.0)
    assert gates_after([], {"spec": {"request": {"kind": "escalation"}}}, None) is None
