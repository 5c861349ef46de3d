"""The quorum of a funnel approval (pure) and a Topology's funnel checks (pure builders)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from swarmkit_api.conditions import REASON_FUNNEL_INVALID, REASON_FUNNEL_NOT_FOUND
from swarmkit_api.funnel import MAX_ROUNDS, Approval, ApprovalRound, ApproveLayer
from swarmkit_api.quorum import tally
from swarmkit_api.topology import TopologySpec
from swarmkit_operator.builders.funnel import (
    check_funnels,
    funnel_version,
    parse_funnel,
    unreachable,
)
from swarmkit_operator.runs.funnel_gate import (
    author_refusal,
    decision,
    revised_review,
    rounds_before,
)

ROLES = {
    "security": {"users": ["sam", "pat"]},
    "product": {"groups": ["pm"]},
    "leads": {"groups": ["leads"]},
}


def policy(*rules: dict[str, Any], **kw: Any) -> ApproveLayer:
    return ApproveLayer.model_validate({"rules": list(rules), "roles": ROLES, **kw})


def sig(who: str, role: str, verdict: str = "approve", text: str | None = None) -> Approval:
    return Approval(verdict=verdict, role=role, decided_by=who, text=text)  # type: ignore[arg-type]


def revise(who: str, role: str) -> Approval:
    return sig(who, role, "revise", "fix the numbers")


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


def test_a_revision_needs_its_comment() -> None:
    with pytest.raises(ValidationError, match="verdict revise needs text"):
        Approval(verdict="revise", role="leads", decided_by="ann")


def test_a_revision_holds_the_gate_even_with_the_quorum_met_and_a_rejection_wins() -> None:
    p = policy({"roles": ["leads"], "kOf": 1})
    asked = tally(p, [sig("ann", "leads"), revise("ben", "leads")], author=None)
    assert not asked.approved and asked.revision is not None
    assert asked.revision.decided_by == "ben"
    both = tally(p, [revise("ben", "leads"), sig("cat", "leads", "reject")], author=None)
    assert both.rejected_by == "cat" and not both.approved
    # the author asking for a revision is not counted (excludeAuthor)
    own = tally(p, [revise("carol", "leads")], author="carol")
    assert own.revision is None and own.ignored == ("carol: created the run (excludeAuthor)",)


TWO_RULES = (
    {"roles": ["security"], "quorum": "all"},
    {"roles": ["product"], "quorum": "all"},
)


def test_reset_all_counts_no_signature_of_an_earlier_round() -> None:
    p = policy(*TWO_RULES, onRevision="resetAll")
    round1 = ApprovalRound(
        round=1, review="r-1", approvals=[sig("sam", "security"), revise("paula", "product")]
    )
    now = tally(p, [sig("paula", "product")], author=None, earlier=[round1])
    assert not now.approved and now.carried == ()
    assert now.missing == ["rule 1 (all of security): waiting for security"]
    again = tally(p, [sig("paula", "product"), sig("sam", "security")], None, [round1])
    assert again.approved


def test_reconfirm_changed_carries_signatures_of_rules_the_revision_did_not_touch() -> None:
    p = policy(*TWO_RULES, onRevision="reconfirmChanged", minDistinctApprovers=2)
    # product asked for the revision: the security rule keeps sam's signature
    round1 = ApprovalRound(
        round=1, review="r-1", approvals=[sig("sam", "security"), revise("paula", "product")]
    )
    waiting = tally(p, [], author=None, earlier=[round1])
    assert waiting.carried == ("sam as security (round 1)",)
    assert waiting.missing == [
        "rule 2 (all of product): waiting for product",
        "minDistinctApprovers: 1 of 2 distinct people signed",
    ]
    now = tally(p, [sig("paula", "product")], author=None, earlier=[round1])
    assert now.approved and now.approvers == ("sam", "paula")
    # a later revision in the security role touches rule 1: sam signs again
    round2 = ApprovalRound(
        round=2, review="r-2", approvals=[sig("paula", "product"), revise("pat", "security")]
    )
    later = tally(p, [], author=None, earlier=[round1, round2])
    assert later.carried == ("paula as product (round 2)",)
    assert [r.satisfied for r in later.rules] == [False, True]
    # a signature is not carried into a rule its role shares with the revision's
    shared = policy(
        {"roles": ["security", "product"], "quorum": "all"}, onRevision="reconfirmChanged"
    )
    assert tally(shared, [], None, [round1]).carried == ()


def _round_review(name: str, approvals: list[dict[str, Any]], node: str = "") -> dict[str, Any]:
    body = _review(approvals)
    body["metadata"]["name"] = name
    body["spec"]["request"]["gate"]["report"]["node"] = node
    return body


def test_operator_resumes_with_the_revision_and_builds_the_next_rounds() -> None:
    ann = {"verdict": "approve", "role": "leads", "decidedBy": "ann"}
    ben = {"verdict": "revise", "role": "leads", "decidedBy": "ben", "text": "cite the docs"}
    found = decision(_review([ann, ben]))
    assert found is not None
    assert (found.verdict, found.decided_by, found.text) == ("revise", "ben", "cite the docs")
    decisions = [
        {"review": "r-0", "kind": "approval", "verdict": "approve"},
        {"review": "r-1", "kind": "funnel_approval", "verdict": "revise"},
    ]
    assert revised_review(decisions) == "r-1"
    assert revised_review([*decisions, {"kind": "funnel_approval", "verdict": "approve"}]) is None
    from swarmkit_api.bundle import ReviewItem

    item = ReviewItem.model_validate(
        {"kind": "funnel_approval", "question": "?", "gate": {"funnel": "notes", "round": 2}}
    )
    [past] = rounds_before(_round_review("r-1", [ann, ben]), item)
    assert (past.round, past.review, [a.decided_by for a in past.approvals]) == (
        1,
        "r-1",
        ["ann", "ben"],
    )
    # a long history keeps the newest MAX_ROUNDS rounds (the Review's schema bounds it)
    long = _round_review("r-21", [ann, ben])
    long["spec"]["request"]["gate"]["rounds"] = [
        {"round": n, "review": f"r-{n}", "approvals": [ann, ben]} for n in range(1, 21)
    ]
    long["spec"]["request"]["gate"]["report"]["round"] = 21
    kept = rounds_before(long, item)
    assert len(kept) == MAX_ROUNDS and (kept[0].round, kept[-1].round) == (2, 21)
    # another gate's Review (other node) is no earlier round of this one
    assert rounds_before(_round_review("r-1", [ann, ben], node="other"), item) == []


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

    from swarmkit_operator.runs import funnel_gate

    def gates_after(gates: Any, review: Any, verdict: str | None) -> Any:
        # As a Run's status write records the gates and, once it went through, counts the
        # transitions it shows first (runs/status.py).
        after = funnel_gate.gates_after(gates, review, verdict)
        for _, state in funnel_gate.new_transitions(gates, after or []):
            funnel_gate.count_transition(review, state)
        return after

    review = _review([])
    review["metadata"]["namespace"] = "team-q"
    labels = {"namespace": "team-q", "funnel": "notes"}

    def count(state: str) -> float:
        value = REGISTRY.get_sample_value("swarmkit_funnel_gates_total", {**labels, "state": state})
        return value or 0.0

    opened = gates_after([], review, None)
    assert opened == [
        {"funnel": "notes", "node": "", "review": "r-1", "attempts": 1, "exhausted": False,
         "round": 1, "state": "AwaitingApproval"}
    ]  # fmt: skip
    settled = gates_after(opened, review, "approve")
    assert settled is not None and [g["state"] for g in settled] == ["Approved"]
    revised = gates_after(opened, review, "revise")
    assert revised is not None and [g["state"] for g in revised] == ["RevisionRequested"]
    assert (count("AwaitingApproval"), count("Approved")) == (1.0, 1.0)
    assert count("RevisionRequested") == 1.0
    assert gates_after([], {"spec": {"request": {"kind": "escalation"}}}, None) is None


def test_a_signature_by_someone_outside_a_user_named_role_does_not_count() -> None:
    # Admission refuses it; the operator re-checks what it can see (issue 46 item 2), so a
    # forged "bob as security" slipped in by another path never opens the gate.
    p = policy({"roles": ["security"], "kOf": 2})
    forged = tally(p, [sig("bob", "security"), sig("sam", "security")], author=None)
    assert not forged.approved
    assert "bob: does not hold role security" in forged.ignored
    assert forged.missing == ["rule 1 (2 of security): 1 more distinct signer(s)"]
    assert tally(p, [sig("pat", "security"), sig("sam", "security")], author=None).approved


CI = "system:serviceaccount:team:ci"


def test_a_service_account_signature_never_counts() -> None:
    # eve may mint the CI account's token: its signature would be a second eve (item 6)
    p = policy({"roles": ["leads"], "kOf": 2})
    two = tally(p, [sig("ann", "leads"), sig(CI, "leads")], author=None)
    assert not two.approved
    assert f"{CI}: a ServiceAccount, not a person" in two.ignored


def test_a_gate_excluding_its_author_refuses_a_run_created_by_a_service_account() -> None:
    excluding = policy({"roles": ["leads"], "kOf": 1}, excludeAuthor=True)
    why = author_refusal("notes-gate", excluding, CI, "team")
    assert why is not None
    assert f"created by ServiceAccount {CI}" in why and "create the Run as a person" in why
    assert author_refusal("notes-gate", excluding, "eve", "team") is None
    assert "has no swarmkit.dev/created-by annotation" in (
        author_refusal("notes-gate", excluding, "", "team") or ""
    )
    # the operator's own account (a scheduled Run) lives in its own namespace
    operator = "system:serviceaccount:swarmkit-system:swarmkit-operator"
    assert author_refusal("notes-gate", excluding, operator, "team") is None
    open_to_all = policy({"roles": ["leads"], "kOf": 1}, excludeAuthor=False)
    assert author_refusal("notes-gate", open_to_all, CI, "team") is None
