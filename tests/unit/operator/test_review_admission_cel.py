"""The Review admission policy's funnel-signature rules, evaluated with a real CEL
interpreter (issue 46 item 2).

The integration tests go through the apiserver, where the CRD's transition rule answers
first; these evaluate the policy alone, so each of the two guards is shown to hold by itself.
"""

from __future__ import annotations

from typing import Any

import celpy
from celpy import celtypes

from swarmkit_operator.admission import (
    origin_validations,
    origin_variables,
    validations,
    variables,
)

GATE = {
    "funnel": "notes-gate",
    "author": "eve",
    "approve": {
        "rules": [{"roles": ["release-lead"], "kOf": 2}],
        "roles": {"release-lead": {"users": ["alice", "bob"]}},
    },
}


def _slice(target: Any, start: Any, end: Any) -> Any:
    # Kubernetes' CEL list library (lists.slice); celpy has no such method
    return celtypes.ListType(target[int(start) : int(end)])


def _substring(target: Any, start: Any) -> Any:
    # Kubernetes' CEL strings library (strings.substring)
    return celtypes.StringType(str(target)[int(start) :])


def _eval(expression: str, activation: dict[str, Any]) -> Any:
    env = celpy.Environment()
    functions = {"slice": _slice, "substring": _substring}
    return env.program(env.compile(expression), functions=functions).evaluate(activation)


def _review(approvals: list[dict[str, str]] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"request": {"kind": "funnel_approval", "gate": GATE}}
    if approvals is not None:
        spec["approvals"] = approvals
    return {"metadata": {"name": "run-notes-1"}, "spec": spec, "status": {"state": "Pending"}}


def refusals(old: list[dict[str, str]] | None, new: list[dict[str, str]], user: str) -> list[str]:
    """The messages of every rule that refuses ``user`` turning ``old`` into ``new``."""
    activation: dict[str, Any] = {
        "request": celpy.json_to_cel(
            {"operation": "UPDATE", "userInfo": {"username": user, "groups": []}}
        ),
        "oldObject": celpy.json_to_cel(_review(old)),
        "object": celpy.json_to_cel(_review(new)),
    }
    computed: dict[str, Any] = {}
    for var in variables():
        activation["variables"] = celtypes.MapType(computed)
        try:
            computed[celtypes.StringType(var["name"])] = _eval(var["expression"], activation)
        except celpy.CELEvalError:  # lazily evaluated in the apiserver: unused here
            continue
    activation["variables"] = celtypes.MapType(computed)
    out = []
    for rule in validations():
        if not bool(_eval(rule["expression"], activation)):
            out.append(str(_eval(rule["messageExpression"], activation)))
    return out


def sig(who: str) -> dict[str, str]:
    return {"verdict": "approve", "role": "release-lead", "decidedBy": who}


PREFIX = "must stay exactly as they are"


def test_appending_your_own_signature_is_admitted() -> None:
    assert refusals(None, [sig("alice")], "alice") == []
    assert refusals([sig("alice")], [sig("alice"), sig("bob")], "bob") == []
    assert refusals([sig("alice")], [sig("alice"), sig("alice")], "alice") == []


def test_inserting_a_forged_signature_before_yours_is_refused() -> None:
    # the list grew by one and its last element is alice's: the old policy looked no further
    [message] = refusals([sig("alice")], [sig("bob"), sig("alice")], "alice")
    assert PREFIX in message and "the 1 earlier signature(s)" in message


def test_replacing_a_duplicate_in_place_is_refused() -> None:
    old = [sig("alice"), sig("alice")]
    [message] = refusals(old, [sig("alice"), sig("bob")], "alice")
    assert PREFIX in message


def test_reordering_or_removing_is_refused() -> None:
    old = [sig("alice"), sig("bob")]
    assert any(PREFIX in m for m in refusals(old, [sig("bob"), sig("alice")], "alice"))
    assert any(PREFIX in m for m in refusals(old, [sig("alice")], "alice"))


def test_a_new_signature_in_someone_elses_name_is_still_refused() -> None:
    messages = refusals([sig("alice")], [sig("alice"), sig("bob")], "alice")
    assert any("must be your authenticated user name alice, not bob" in m for m in messages)


def test_a_service_account_cannot_sign() -> None:
    ci = "system:serviceaccount:team:ci"
    messages = refusals([sig("alice")], [sig("alice"), sig(ci)], ci)
    assert any("a ServiceAccount does not sign a funnel approval" in m for m in messages)


OPERATOR = "system:serviceaccount:swarmkit-system:swarmkit-operator"


def _origin(
    operation: str,
    user: str,
    meta: dict[str, Any],
    old_meta: dict[str, Any] | None = None,
) -> list[str]:
    """The messages of the origin rules refusing ``user`` (the policy as deploy/ has it)."""
    activation: dict[str, Any] = {
        "request": celpy.json_to_cel(
            {"operation": operation, "namespace": "team", "userInfo": {"username": user}}
        ),
        "object": celpy.json_to_cel({**_review(None), "metadata": {"name": "r", **meta}}),
    }
    if old_meta is not None:
        activation["oldObject"] = celpy.json_to_cel(
            {**_review(None), "metadata": {"name": "r", **old_meta}}
        )
    computed: dict[str, Any] = {}
    for var in origin_variables():
        activation["variables"] = celtypes.MapType(computed)
        computed[celtypes.StringType(var["name"])] = _eval(var["expression"], activation)
    activation["variables"] = celtypes.MapType(computed)
    return [
        str(_eval(r["messageExpression"], activation))
        for r in origin_validations()
        if not bool(_eval(r["expression"], activation))
    ]


def _created(user: str, labels: dict[str, str]) -> list[str]:
    return _origin("CREATE", user, {"labels": labels})


def test_a_review_labelled_as_a_gateways_is_opened_by_the_operator_only() -> None:
    """Issue 46 item 5: not by a person, not by the gateway's own account (an editor can
    mint its token), not by another gateway's."""
    gw = {"swarmkit.dev/gateway": "deployer"}
    assert _created(OPERATOR, gw) == []
    assert _created("eve", {}) == []  # no origin label: RBAC alone says who may
    expected = (
        "a Review labelled swarmkit.dev/gateway=deployer is opened only by the operator "
        f"({OPERATOR}) on its behalf, not by "
    )
    for user in (
        "eve",
        "system:serviceaccount:team:gw-deployer",
        "system:serviceaccount:team:gw-other",
        "system:serviceaccount:team:workspace-runner",
    ):
        assert _created(user, gw) == [expected + user]


def test_a_review_labelled_as_a_runs_or_a_skills_is_opened_by_the_operator_only() -> None:
    for label in ("swarmkit.dev/run-uid", "swarmkit.dev/skill"):
        assert _created(OPERATOR, {label: "x"}) == []
        [message] = _created("adam", {label: "x"})
        assert f"labelled {label}=x is opened only by the operator" in message


def test_created_by_names_the_creator_and_never_changes() -> None:
    mine = {"annotations": {"swarmkit.dev/created-by": OPERATOR}}
    assert _origin("CREATE", OPERATOR, mine) == []
    [forged] = _origin("CREATE", "adam", mine)
    assert "must be your authenticated user name adam" in forged
    for changed in ({"annotations": {"swarmkit.dev/created-by": "adam"}}, {}):
        [message] = _origin("UPDATE", "alice", changed, mine)
        assert "who opened review r" in message and "cannot be added, changed" in message
    relabelled = {**mine, "labels": {"swarmkit.dev/gateway": "deployer"}}
    assert _origin("UPDATE", "alice", relabelled, mine) != []
    assert _origin("UPDATE", "alice", mine, mine) == []
