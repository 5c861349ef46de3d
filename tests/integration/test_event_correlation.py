"""Events under control on the real control plane (issue 43), the operator running as the
chart's ServiceAccount: a condition that fails again and again is one Warning Event whose
count grows (a PATCH the chart's RBAC grants), and a burst of new objects posts no Event
per object, while a new object's Warning still shows."""

from __future__ import annotations

from typing import Any

from swarmkit_devcluster.testing import Kube, wait_for

from .runs_support import OperatorProcess

GROUP, VERSION = "swarmkit.dev", "v1alpha1"
TIMEOUT = 60.0
WORKSPACE: dict[str, Any] = {"modelProviders": [{"name": "replay", "type": "replay"}]}
SKILL: dict[str, Any] = {
    "description": "Use when testing.",
    "category": "capability",
    "provenance": {"authoredBy": "human", "version": "1.0.0"},
}


def _apply(kube: Kube, ns: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    plural = {"Workspace": "workspaces", "Skill": "skills", "Agent": "agents"}[kind]
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}}
    try:
        kube.custom.get_namespaced_custom_object(GROUP, VERSION, ns, plural, name)
    except Exception:
        kube.custom.create_namespaced_custom_object(
            GROUP, VERSION, ns, plural, {**body, "spec": spec}
        )
        return
    kube.custom.patch_namespaced_custom_object(GROUP, VERSION, ns, plural, name, {"spec": spec})


def _condition(kube: Kube, ns: str, plural: str, name: str, type_: str) -> dict[str, Any]:
    obj = kube.custom.get_namespaced_custom_object(GROUP, VERSION, ns, plural, name)
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond["type"] == type_:
            return dict(cond)
    return {}


def _events(kube: Kube, ns: str, name: str) -> list[Any]:
    return [e for e in kube.core.list_namespaced_event(ns).items if e.involved_object.name == name]


def test_a_repeated_warning_is_one_event_with_a_count_and_new_objects_post_none(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    _apply(kube, ns, "Workspace", "default", WORKSPACE)
    for i in range(20):  # a burst of new objects, all Ready on their first status
        _apply(kube, ns, "Skill", f"s{i}", SKILL)
    for i in range(20):
        wait_for(
            lambda i=i: _condition(kube, ns, "skills", f"s{i}", "Ready").get("status") == "True",
            TIMEOUT,
            message=f"skill s{i} Ready",
        )

    # An Agent flipping between a missing skill and a present one: each flip to the
    # missing one is a SkillNotFound Warning of the same object.
    flips = 4
    for _ in range(flips):
        _apply(kube, ns, "Agent", "flapping", {"skills": ["ghost"]})
        wait_for(
            lambda: (
                _condition(kube, ns, "agents", "flapping", "SkillsResolved").get("reason")
                == "SkillNotFound"
            ),
            TIMEOUT,
            message="SkillsResolved False SkillNotFound",
        )
        _apply(kube, ns, "Agent", "flapping", {"skills": ["s0"]})
        wait_for(
            lambda: (
                _condition(kube, ns, "agents", "flapping", "SkillsResolved").get("status") == "True"
            ),
            TIMEOUT,
            message="SkillsResolved True",
        )

    def warnings() -> list[Any]:
        return [e for e in _events(kube, ns, "flapping") if e.reason == "SkillNotFound"]

    wait_for(
        lambda: len(warnings()) == 1 and warnings()[0].count == flips,
        TIMEOUT,
        message=f"one SkillNotFound Event with count {flips}: "
        f"{[(e.reason, e.count) for e in _events(kube, ns, 'flapping')]}",
    )
    (event,) = warnings()
    assert event.type == "Warning" and "ghost" in event.message
    assert event.last_timestamp >= event.first_timestamp
    # the recoveries are Normal Events of the same object: one Event per reason, counted
    normal = [e for e in _events(kube, ns, "flapping") if e.type == "Normal"]
    assert normal and len(normal) == len({e.reason for e in normal})
    assert sum(e.count for e in normal) >= flips
    # the 20 Skills created Ready posted nothing
    assert not [
        e for e in kube.core.list_namespaced_event(ns).items if e.involved_object.kind == "Skill"
    ]
