"""Workspace rendering: Secret references listed, never read nor copied."""

from __future__ import annotations

import json
from typing import Any

import yaml

from swarmkit_operator.builders import ObjectRef
from swarmkit_operator.builders.skill import SourceConfigMap
from swarmkit_operator.builders.workspace import render_workspace

OWNER = ObjectRef("Workspace", "default", "team-a", "uid-ws")
SPEC: dict[str, Any] = {
    "modelProviders": [
        {
            "name": "claude",
            "type": "anthropic",
            "apiKey": {"name": "model-keys", "key": "anthropic"},
        }
    ],
    "mcpServers": [
        {
            "id": "github",
            "transport": "stdio",
            "command": ["npx", "server-github"],
            "env": [{"name": "GITHUB_TOKEN", "secretKeyRef": {"name": "gh", "key": "token"}}],
        }
    ],
    "flowData": [
        {"path": "exclusions.yaml", "content": "- vendor/\n"},
        {"path": "matrix.md", "configMapRef": {"name": "flow", "key": "matrix"}},
    ],
}


def v(render: Any) -> dict[str, tuple[str, str]]:
    return {x.type: (x.status, x.reason) for x in render.verdicts}


def test_ready_with_its_secret_references_listed_unread() -> None:
    """Ready whatever the Secrets hold (the operator cannot read them: issue 41); the
    references a Run's pod gets as secretKeyRef env are listed in secrets.json."""
    flow = {"flow": SourceConfigMap({"matrix": "| a |\n"})}
    render = render_workspace(OWNER, SPEC, flow)
    assert v(render) == {"Accepted": ("True", "Valid"), "Ready": ("True", "Rendered")}
    cm = render.config_map
    assert cm is not None and render.version is not None
    assert cm["metadata"]["name"] == f"ws-default-{render.version[:8]}"
    refs = json.loads(cm["data"]["secrets.json"])
    assert {(r["name"], r["key"]) for r in refs} == {("model-keys", "anthropic"), ("gh", "token")}
    assert yaml.safe_load(cm["data"]["workspace.yaml"])["modelProviders"][0]["apiKey"] == {
        "name": "model-keys",
        "key": "anthropic",
    }
    flow_index = json.loads(cm["data"]["flow.json"])
    assert [f["path"] for f in flow_index] == ["exclusions.yaml", "matrix.md"]
    assert cm["data"][flow_index[1]["key"]] == "| a |\n"


def test_endpoint_and_type_are_rejected_naming_the_right_field() -> None:
    spec = {
        "tools": [
            {"name": "t", "description": "d", "endpoint": "https://x", "http": {"url": "https://x"}}
        ]
    }
    render = render_workspace(OWNER, spec, {})
    accepted = next(x for x in render.verdicts if x.type == "Accepted")
    assert accepted.reason == "Invalid" and "http.url" in accepted.message
    spec = {
        "tools": [{"name": "t", "description": "d", "type": "http", "http": {"url": "https://x"}}]
    }
    accepted = next(x for x in render_workspace(OWNER, spec, {}).verdicts)
    assert "handlerType" in accepted.message


def test_duplicate_names() -> None:
    spec = {
        "permissionBundles": [{"name": "a", "permissions": []}, {"name": "a", "permissions": []}]
    }
    assert v(render_workspace(OWNER, spec, {}))["Accepted"] == ("False", "DuplicateName")
