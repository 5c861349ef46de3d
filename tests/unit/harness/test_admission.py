"""Harness nodes at admission: the wire format and the capabilities a node needs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from swarmkit_api.agent import AgentSpec
from swarmkit_api.harness import HARNESSES, HarnessSpec, harness_problem, required_capabilities
from swarmkit_api.topology import TopologySpec
from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator.builders.agent import WorkspaceView
from swarmkit_operator.builders.topology import AgentView, Graph, resolve_topology


def workspace(provider_type: str) -> WorkspaceView:
    extra: dict[str, Any] = {"aws": {"region": "us-east-1"}} if provider_type == "bedrock" else {}
    spec = WorkspaceSpec.model_validate(
        {"modelProviders": [{"name": "main", "type": provider_type, **extra}]}
    )
    return WorkspaceView("default", spec, ready=True, reason="Rendered")


def topology(harness: dict[str, Any], children: bool = False) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = [
        {"name": "coder", "agentRef": {"name": "coder"}, "role": "root", "harness": harness}
    ]
    if children:
        nodes.append(
            {"name": "w", "agentRef": {"name": "coder"}, "role": "worker", "parent": "coder"}
        )
    return {"workspaceRef": {"name": "default"}, "agents": nodes}


def resolve(spec: dict[str, Any], agent: dict[str, Any], ws: WorkspaceView) -> dict[str, Any]:
    graph = Graph({"t": ["coder"]}, {"coder": []}, {}, {})
    view = AgentView("coder", "v1", ready=True, spec=AgentSpec.model_validate(agent))
    render = resolve_topology("t", spec, {"coder": view}, {}, graph, ws)
    return {v.type: (v.status, v.reason, v.message) for v in render.verdicts}


def test_claude_code_on_an_anthropic_provider_is_accepted() -> None:
    verdicts = resolve(
        topology({"kind": "claude-code"}), {"tools": ["echo"]}, workspace("anthropic")
    )
    assert verdicts["Accepted"][:2] == ("True", "Valid")


@pytest.mark.parametrize("provider_type", ["openai", "gemini", "bedrock"])
def test_a_provider_of_another_wire_format_is_refused_naming_its_type(provider_type: str) -> None:
    verdicts = resolve(topology({"kind": "claude-code"}), {}, workspace(provider_type))
    status, reason, message = verdicts["Accepted"]
    assert (status, reason) == ("False", "HarnessUnsupported")
    assert "spec.agents[0].harness.kind" in message
    assert f"type {provider_type}" in message and "anthropic-messages" in message
    assert verdicts["Ready"][1] == "HarnessUnsupported"


def test_codex_on_an_openai_provider_is_accepted_and_on_anthropic_refused() -> None:
    verdicts = resolve(topology({"kind": "codex"}), {"tools": ["echo"]}, workspace("openai"))
    assert verdicts["Accepted"][:2] == ("True", "Valid")
    status, reason, message = resolve(topology({"kind": "codex"}), {}, workspace("anthropic"))[
        "Accepted"
    ]
    assert (status, reason) == ("False", "HarnessUnsupported")
    assert "openai-responses" in message and "type anthropic" in message


def test_gemini_cli_on_a_gemini_provider_is_accepted_and_on_openai_refused() -> None:
    verdicts = resolve(topology({"kind": "gemini-cli"}), {"tools": ["echo"]}, workspace("gemini"))
    assert verdicts["Accepted"][:2] == ("True", "Valid")
    status, reason, message = resolve(topology({"kind": "gemini-cli"}), {}, workspace("openai"))[
        "Accepted"
    ]
    assert (status, reason) == ("False", "HarnessUnsupported")
    assert "gemini-generate-content" in message and "type openai" in message


def test_every_harness_speaks_a_wire_format_the_proxy_forwards() -> None:
    from swarmkit_api.harness import PROXIED_WIRE_FORMATS
    from swarmkit_runner.harness.proxy import DIALECTS

    assert {h.wire_format for h in HARNESSES.values()} <= set(PROXIED_WIRE_FORMATS)
    assert set(DIALECTS) == set(PROXIED_WIRE_FORMATS)


@pytest.mark.parametrize(
    ("kind", "provider", "native", "missing"),
    [
        ("codex", "openai", {"fileIo": True}, ["native-file-read"]),
        ("gemini-cli", "gemini", {"bash": True}, ["native-shell"]),
        ("claude-code", "anthropic", {"webSearch": True}, ["native-web"]),
    ],
)
def test_a_capability_the_conformance_test_has_not_shown_is_refused(
    kind: str, provider: str, native: dict[str, bool], missing: list[str]
) -> None:
    verdicts = resolve(
        topology({"kind": kind, "builtinTools": True}),
        {"nativeTools": native},
        workspace(provider),
    )
    status, reason, message = verdicts["Accepted"]
    assert (status, reason) == ("False", "HarnessUnsupported")
    assert all(m in message for m in missing), message
    assert HARNESSES[kind].version in message


def test_claude_codes_built_ins_are_admitted_where_its_hook_governs_them() -> None:
    # tests/unit/harness/test_builtin_hooks.py shows its PreToolUse hook deciding them.
    agent = {"nativeTools": {"bash": True, "fileIo": True}}
    for tier in ("open", "cautious", "strict"):
        harness = {"kind": "claude-code", "builtinTools": True, "builtinToolsPermission": tier}
        verdicts = resolve(topology(harness), agent, workspace("anthropic"))
        assert verdicts["Accepted"][0] == "True", (tier, verdicts)
    spec = HarnessSpec.model_validate({"kind": "claude-code", "builtinTools": True})
    assert spec.builtin_tools_permission == "cautious"
    needed = required_capabilities(AgentSpec.model_validate(agent), spec)
    assert {"tool-hook", "native-shell", "native-file-read", "native-file-write"} <= set(needed)


def test_gemini_clis_file_tools_are_admitted_where_its_hook_and_policy_govern_them() -> None:
    # tests/unit/harness/test_gemini_cli_builtins.py shows its BeforeTool hook deciding them.
    for tier in ("readonly", "cautious", "strict"):
        harness = {"kind": "gemini-cli", "builtinTools": True, "builtinToolsPermission": tier}
        verdicts = resolve(
            topology(harness), {"nativeTools": {"fileIo": True}}, workspace("gemini")
        )
        assert verdicts["Accepted"][0] == "True", (tier, verdicts)


def test_codexs_shell_is_admitted_as_a_built_in() -> None:
    harness = {"kind": "codex", "builtinTools": True, "builtinToolsPermission": "strict"}
    verdicts = resolve(topology(harness), {"nativeTools": {"bash": True}}, workspace("openai"))
    assert verdicts["Accepted"][0] == "True", verdicts


def test_a_readonly_tier_refuses_a_built_in_shell_and_admits_file_reading() -> None:
    harness = {"kind": "claude-code", "builtinTools": True, "builtinToolsPermission": "readonly"}
    verdicts = resolve(topology(harness), {"nativeTools": {"bash": True}}, workspace("anthropic"))
    status, reason, message = verdicts["Accepted"]
    assert (status, reason) == ("False", "HarnessUnsupported")
    assert "spec.agents[0].harness.builtinToolsPermission: readonly" in message
    assert "shell (effects unknown)" in message
    # File I/O: its reads are allowed, each edit is refused (and audited) when it is asked.
    verdicts = resolve(topology(harness), {"nativeTools": {"fileIo": True}}, workspace("anthropic"))
    assert verdicts["Accepted"][0] == "True", verdicts
    # The same shell without built-ins is the runner's governed tool: admitted.
    off = {"kind": "claude-code", "builtinToolsPermission": "readonly"}
    verdicts = resolve(topology(off), {"nativeTools": {"bash": True}}, workspace("anthropic"))
    assert verdicts["Accepted"][0] == "True", verdicts


def test_native_tools_without_built_ins_go_through_the_gateway() -> None:
    agent = AgentSpec.model_validate({"nativeTools": {"bash": True, "fileIo": True}})
    needed = required_capabilities(agent, HarnessSpec(kind="claude-code"))
    assert needed == ["final-answer", "mcp-tools", "usage"]


def test_a_required_capability_is_checked_too() -> None:
    spec = HarnessSpec.model_validate({"kind": "claude-code", "requires": ["skills"]})
    problem = harness_problem(spec, AgentSpec(), None, "spec.agents[0].harness")
    assert problem is not None and "skills" in problem


def test_a_kind_without_a_conformance_test_is_refused() -> None:
    missing = [k for k in ("codex", "gemini-cli") if k not in HARNESSES]
    for kind in missing:
        problem = harness_problem(HarnessSpec(kind=kind), AgentSpec(), None, "f")  # type: ignore[arg-type]
        assert problem is not None and "no conformance test" in problem


def test_an_unknown_kind_is_refused_by_the_schema() -> None:
    with pytest.raises(ValidationError, match="kind"):
        TopologySpec.model_validate(topology({"kind": "opencode"}))


def test_a_harness_node_cannot_have_children() -> None:
    with pytest.raises(ValidationError, match="a harness node has no children"):
        TopologySpec.model_validate(topology({"kind": "claude-code"}, children=True))
