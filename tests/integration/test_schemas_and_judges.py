"""A Funnel whose judge skill does not exist, and a JSON Schema broken deep inside a Skill,
are reported before anything runs (issue 47 item 7), against the real control plane.

Before, both were Ready and every Run using them failed at run time. Now the Funnel is
``Ready=False SkillNotFound`` naming the skill and turns Ready by itself when the Skill is
created (the Skill's watch event enqueues the Funnels judging with it); a Skill whose
``outputs`` hides ``{type: banana}`` three levels down is ``Accepted=False InvalidSchema``
naming that field.
"""

from __future__ import annotations

from typing import Any

from swarmkit_devcluster.testing import Kube, wait_for

from .runs_support import OperatorProcess, create, example, get, timer, wait_ready


def _condition(kube: Kube, ns: str, kind: str, name: str, type_: str) -> dict[str, Any]:
    obj = get(kube, ns, kind, name) or {}
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return dict(cond)
    return {}


def test_a_funnel_waits_for_its_judge_skill_and_recovers_when_it_appears(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    gate = example("Funnel")
    judge = gate["spec"]["judge"]["skill"]
    create(kube, namespace, gate)
    name = gate["metadata"]["name"]
    with timer() as took:
        wait_for(
            lambda: (
                _condition(kube, namespace, "Funnel", name, "Ready").get("reason")
                == "SkillNotFound"
            ),
            30,
            message=lambda: f"Funnel SkillNotFound\n{operator.tail()}",
        )
        seen = took()
    ready = _condition(kube, namespace, "Funnel", name, "Ready")
    assert ready["status"] == "False"
    assert f"spec.judge.skill: Skill {judge!r} not found" in ready["message"]
    assert _condition(kube, namespace, "Funnel", name, "Accepted")["status"] == "True"
    assert seen < 10, seen

    create(kube, namespace, example("Skill", judge))
    with timer() as took:
        wait_ready(kube, namespace, "Funnel", name, timeout=30)
        assert took() < 10, took()


def test_a_skill_with_a_nested_invalid_schema_is_invalid_schema(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    skill = example("Skill", "code-quality-review")
    skill["metadata"] = {"name": "banana"}
    nested = {"type": "object", "properties": {"b": {"type": "banana"}}}
    skill["spec"]["outputs"]["properties"]["nested"] = {"type": "array", "items": nested}
    create(kube, namespace, skill)  # admitted: the apiserver cannot check a nested schema

    def refused() -> dict[str, Any] | None:
        cond = _condition(kube, namespace, "Skill", "banana", "Accepted")
        return cond if cond.get("reason") == "InvalidSchema" else None

    cond = wait_for(refused, 30, message=lambda: f"InvalidSchema\n{operator.tail()}")
    assert cond["status"] == "False"
    assert cond["message"].startswith(
        "spec.outputs.properties.nested.items.properties.b.type: not a valid JSON Schema: "
        "'banana' is not a JSON Schema type"
    ), cond
    ready = _condition(kube, namespace, "Skill", "banana", "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSchema")
