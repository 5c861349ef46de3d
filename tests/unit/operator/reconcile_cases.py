"""What the reconciler tests share: the objects a user creates and how they read status back
(the fixtures ``api`` and ``operator`` are in this package's ``conftest.py``)."""

from __future__ import annotations

from typing import Any

from tests.support.fake_k8s import FakeApi

NS = "team"

WORKSPACE: dict[str, Any] = {
    "modelProviders": [{"name": "replay", "type": "replay"}],
    "permissionBundles": [{"name": "worker", "permissions": ["mailbox_send"]}],
}


def skill_spec(**extra: Any) -> dict[str, Any]:
    return {
        "description": "Use when testing.",
        "category": "capability",
        "provenance": {"authoredBy": "human", "version": "1.0.0"},
        **extra,
    }


def topology_spec(*agents: str) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = [
        {"name": "root", "agentRef": {"name": agents[0]}, "role": "root"}
    ]
    nodes += [
        {"name": f"w{i}", "agentRef": {"name": a}, "role": "worker", "parent": "root"}
        for i, a in enumerate(agents[1:])
    ]
    return {"workspaceRef": {"name": "default"}, "agents": nodes}


def status(api: FakeApi, kind: str, name: str) -> dict[str, Any]:
    found = api.get(kind, NS, name)
    assert found is not None, f"{kind} {name} is gone"
    return dict(found.get("status") or {})


def condition(api: FakeApi, kind: str, name: str, type_: str) -> dict[str, Any]:
    found = api.condition(kind, NS, name, type_)
    assert found is not None, f"{kind} {name} has no {type_} condition: {status(api, kind, name)}"
    return found


def events(api: FakeApi, name: str) -> list[tuple[str, str]]:
    """(type, reason) of the Events about the object ``name``."""
    return [
        (e["type"], e["reason"])
        for e in api.list("Event", NS)
        if e["involvedObject"]["name"] == name
    ]
