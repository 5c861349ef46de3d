"""Workspace rendering: Secret references checked, never copied."""

from __future__ import annotations

import json
from typing import Any

import yaml

from swarmkit_operator.builders import ObjectRef
from swarmkit_operator.builders.skill import SourceConfigMap
from swarmkit_operator.builders.workspace import referenced_secrets, render_workspace

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


def test_ready_when_every_secret_key_exists() -> None:
    secrets = {"model-keys": frozenset({"anthropic"}), "gh": frozenset({"token"})}
    flow = {"flow": SourceConfigMap({"matrix": "| a |\n"})}
    render = render_workspace(OWNER, SPEC, secrets, flow)
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
    assert referenced_secrets(SPEC) == {"model-keys", "gh"}


def test_missing_secret_or_key_names_both_never_a_value() -> None:
    flow = {"flow": SourceConfigMap({"matrix": ""})}
    render = render_workspace(OWNER, SPEC, {"model-keys": None, "gh": frozenset({"x"})}, flow)
    assert v(render)["Ready"] == ("False", "SecretNotFound")
    message = next(x.message for x in render.verdicts if x.type == "Ready")
    assert "'model-keys'" in message and "'anthropic'" in message
    assert "'gh'" in message and "'token'" in message
    assert render.config_map is not None  # references only: still rendered
    assert len(render.problems) == 2


def test_endpoint_and_type_are_rejected_naming_the_right_field() -> None:
    spec = {
        "tools": [
            {"name": "t", "description": "d", "endpoint": "https://x", "http": {"url": "https://x"}}
        ]
    }
    render = render_workspace(OWNER, spec, {}, {})
    accepted = next(x for x in render.verdicts if x.type == "Accepted")
    assert accepted.reason == "Invalid" and "http.url" in accepted.message
    spec = {
        "tools": [{"name": "t", "description": "d", "type": "http", "http": {"url": "https://x"}}]
    }
    accepted = next(x for x in render_workspace(OWNER, spec, {}, {}).verdicts)
    assert "handlerType" in accepted.message


def test_duplicate_names() -> None:
    spec = {
        "permissionBundles": [{"name": "a", "permissions": []}, {"name": "a", "permissions": []}]
    }
    assert v(render_workspace(OWNER, spec, {}, {}))["Accepted"] == ("False", "DuplicateName")
