"""The admission policy of a forced promotion (swarmkit-promote-force), evaluated with a
real CEL interpreter: only a caller the authorizer grants the ``promote`` verb on the
object, in their own name, may add or change the force annotations; removing them, and
every other edit, is admitted."""

from __future__ import annotations

from typing import Any

import celpy
from celpy import celtypes

from swarmkit_api.promotion import FORCE_PROMOTE_ANNOTATION, FORCE_PROMOTED_BY_ANNOTATION
from swarmkit_operator.admission_promotion import manifests, validations

#: Who the stand-in authorizer grants ``promote`` (the chart's admin role).
ADMINS = {"alice"}


def _authorizer(user: str) -> Any:
    """Kubernetes' CEL authorizer library, as far as the policy calls it."""

    def chain(target: Any, _arg: Any) -> Any:
        return target

    def check(target: Any, verb: Any) -> Any:
        return celtypes.BoolType(str(verb) == "promote" and user in ADMINS)

    def allowed(target: Any) -> Any:
        return target

    return {
        "group": chain,
        "resource": chain,
        "namespace": chain,
        "name": chain,
        "check": check,
        "allowed": allowed,
    }


def _topology(annotations: dict[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "support", "namespace": "team-a"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {}}


def refusals(
    old: dict[str, str] | None, new: dict[str, str] | None, user: str, op: str = "UPDATE"
) -> list[str]:
    env = celpy.Environment()
    activation: dict[str, Any] = {
        "request": celpy.json_to_cel(
            {
                "operation": op,
                "userInfo": {"username": user},
                "resource": {"resource": "topologies"},
                "namespace": "team-a",
                "name": "support",
            }
        ),
        "object": celpy.json_to_cel(_topology(new)),
        "oldObject": celpy.json_to_cel(_topology(old) if op == "UPDATE" else None),
        "authorizer": celtypes.StringType("authorizer"),
    }
    out = []
    for rule in validations():
        functions = _authorizer(user)
        program = env.program(env.compile(rule["expression"]), functions=functions)
        if not bool(program.evaluate(activation)):
            message = env.program(env.compile(rule["messageExpression"]), functions=functions)
            out.append(str(message.evaluate(activation)))
    return out


def force(version: str, by: str) -> dict[str, str]:
    return {FORCE_PROMOTE_ANNOTATION: version, FORCE_PROMOTED_BY_ANNOTATION: by}


def test_an_admin_forces_in_their_own_name() -> None:
    assert refusals({}, force("bbbb", "alice"), "alice") == []
    assert refusals(None, force("bbbb", "alice"), "alice") == []


def test_an_editor_without_the_promote_verb_is_refused() -> None:
    [message] = refusals({}, force("bbbb", "bob"), "bob")
    assert "promote verb on topologies.swarmkit.dev support" in message


def test_forcing_in_someone_elses_name_is_refused() -> None:
    [message] = refusals({}, force("bbbb", "bob"), "alice")
    assert "must be your authenticated user name alice" in message


def test_the_version_alone_is_refused() -> None:
    [message] = refusals({}, {FORCE_PROMOTE_ANNOTATION: "bbbb"}, "alice")
    assert "set together with" in message


def test_changing_an_earlier_force_needs_the_verb_again() -> None:
    assert refusals(force("aaaa", "alice"), force("bbbb", "alice"), "bob") != []


def test_unrelated_edits_and_removal_are_admitted() -> None:
    # An editor edits an object someone forced earlier: the annotations stay as they are.
    assert refusals(force("aaaa", "alice"), force("aaaa", "alice"), "bob") == []
    assert refusals(force("aaaa", "alice"), {}, "bob") == []
    assert refusals(None, {"team": "x"}, "bob") == []


def test_create_with_a_force_is_checked_too() -> None:
    assert refusals(None, force("bbbb", "bob"), "bob", op="CREATE") != []
    assert refusals(None, {"team": "x"}, "bob", op="CREATE") == []


def test_the_policy_matches_topologies_and_agents() -> None:
    policy, binding = manifests()
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["topologies", "agents"]
    assert binding["spec"]["validationActions"] == ["Deny"]
