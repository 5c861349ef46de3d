"""Small factories for valid ``RunBundle`` objects, and writing them to disk.

Everything takes plain Python values and returns the shared ``swarmkit_api`` models, so a
test reads like the manifest it stands for::

    server = ScriptedModelServer([...]).start()
    b = bundle(
        agents=[agent("triage", skills=["incident-triage"], provider="m")],
        skills=[skill("incident-triage", instructions="# Triage", files={"ref.md": "..."})],
        providers=[openai_provider("m", server.openai_base_url)],
    )
    layout = write_bundle(b, tmp_path)   # bundle.json + <skills>/<name>/<files>

:func:`write_bundle` lays files out the way the operator mounts them (one directory per
skill with its bundled files and SKILL.md) and returns the paths to pass to the runner.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swarmkit_api.agent import AgentSpec
from swarmkit_api.bundle import (
    BUNDLE_FILE,
    SKILLS_MOUNT,
    BundleAgent,
    BundleSkill,
    BundleTopology,
    RunBundle,
    RunInfo,
    ScriptPin,
)
from swarmkit_api.common import SecretKeyRef
from swarmkit_api.skill import SkillSpec
from swarmkit_api.topology import TopologySpec
from swarmkit_api.workspace import Governance, McpServer, ModelProvider, Tool, WorkspaceSpec

DEFAULT_DESCRIPTION = "Use when the task needs this skill."


def sha256_text(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def skill(
    name: str,
    description: str = DEFAULT_DESCRIPTION,
    *,
    instructions: str = "",
    files: Mapping[str, str] | None = None,
    implementation: Mapping[str, Any] | None = None,
    approved_scripts: Iterable[str] = (),
    pins: Iterable[ScriptPin] = (),
    category: str = "capability",
    audit: Mapping[str, Any] | None = None,
    constraints: Mapping[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
    callable: bool = True,
    blocked_reason: str = "",
    authored_by: str = "human",
    reviewed: bool = False,
    synthesized_topology: str | None = None,
    outputs: Mapping[str, Any] | None = None,
    **spec: Any,
) -> BundleSkill:
    """A pinned skill. ``files`` maps path → content (written to disk by write_bundle);
    each path in ``approved_scripts`` gets an approved pin of its current content."""
    files = dict(files or {})
    data: dict[str, Any] = {
        "description": description,
        "category": category,
        "provenance": {"authoredBy": authored_by, "version": "1.0.0"},
        "instructions": instructions,
        "files": [{"path": p, "content": c} for p, c in files.items()],
        **spec,
    }
    if implementation is not None:
        data["implementation"] = dict(implementation)
    if audit is not None:
        data["audit"] = dict(audit)
    if constraints is not None:
        data["constraints"] = dict(constraints)
    if inputs is not None:
        data["inputs"] = dict(inputs)
    if outputs is not None:
        data["outputs"] = dict(outputs)
    script_pins = list(pins) + [
        ScriptPin(path=p, sha256=sha256_text(files[p]), approved=True, reason="Approved")
        for p in approved_scripts
    ]
    spec_model = SkillSpec.model_validate(data)
    return BundleSkill(
        name=name,
        content_hash=sha256_text(json.dumps(spec_model.wire(), sort_keys=True)),
        spec=spec_model,
        directory=f"{SKILLS_MOUNT}/{name}",
        scripts=script_pins,
        callable=callable,
        blocked_reason=blocked_reason,
        reviewed=reviewed,
        synthesized_topology=synthesized_topology,
    )


def mcp_tool_skill(
    name: str, server: str, tool: str, arguments: Mapping[str, Any] | None = None, **kw: Any
) -> BundleSkill:
    """An ``mcp_tool`` skill."""
    impl: dict[str, Any] = {"type": "mcp_tool", "server": server, "tool": tool}
    if arguments is not None:
        impl["arguments"] = dict(arguments)
    return skill(name, implementation=impl, **kw)


def agent(
    name: str,
    *,
    system_prompt: str = "You are a helpful agent.",
    provider: str | None = None,
    model: str | None = "test-model",
    skills: Iterable[str] = (),
    tools: Iterable[str] = (),
    native: Mapping[str, bool] | None = None,
    replay: Iterable[Mapping[str, Any]] | None = None,
    permissions: Iterable[str] = (),
    flow_data_access: Iterable[str] = (),
    max_steps: int | None = None,
    max_tokens: int = 1024,
    description: str = "",
    scopes: Iterable[str] = (),
    commands: Iterable[str] = (),
    resolved_skills: Iterable[str] | None = None,
    **spec: Any,
) -> BundleAgent:
    """A pinned agent. ``replay`` turns are dicts like ``{"text": ...}`` or
    ``{"toolCalls": [{"name": ..., "arguments": {...}}]}``."""
    data: dict[str, Any] = {
        "systemPrompt": system_prompt,
        "description": description,
        "skills": list(skills),
        "tools": list(tools),
        "model": {"provider": provider, "name": model, "maxTokens": max_tokens},
        "permissions": list(permissions),
        "flowDataAccess": list(flow_data_access),
        "scopes": list(scopes),
        **spec,
    }
    if native is not None:
        data["nativeTools"] = dict(native)
    if replay is not None:
        data["replay"] = [dict(t) for t in replay]
    if max_steps is not None:
        data["maxSteps"] = max_steps
    spec_model = AgentSpec.model_validate(data)
    return BundleAgent(
        name=name,
        version=sha256_text(json.dumps(spec_model.wire(), sort_keys=True))[:12],
        spec=spec_model,
        skills=list(resolved_skills if resolved_skills is not None else skills),
        permissions=list(permissions),
        commands=list(commands),
    )


def secret_ref(name: str, key: str = "value") -> SecretKeyRef:
    return SecretKeyRef(name=name, key=key)


def anthropic_provider(
    name: str, base_url: str, api_key: SecretKeyRef | None = None, **kw: Any
) -> ModelProvider:
    return ModelProvider(name=name, type="anthropic", base_url=base_url, api_key=api_key, **kw)


def openai_provider(
    name: str, base_url: str, api_key: SecretKeyRef | None = None, **kw: Any
) -> ModelProvider:
    return ModelProvider(name=name, type="openai", base_url=base_url, api_key=api_key, **kw)


def replay_provider(name: str = "replay") -> ModelProvider:
    return ModelProvider(name=name, type="replay")


def stdio_server(id: str, command: list[str], **kw: Any) -> McpServer:
    """A stdio MCP server (``env`` as a list of ``{"name", "value"|"secretKeyRef"}``)."""
    return McpServer.model_validate({"id": id, "transport": "stdio", "command": command, **kw})


def http_server(id: str, url: str, **kw: Any) -> McpServer:
    """A streamable-HTTP MCP server (``headers`` as ``[{"name", "secretKeyRef", "prefix"}]``)."""
    return McpServer.model_validate({"id": id, "transport": "http", "url": url, **kw})


def http_tool(name: str, url: str, method: str = "POST", **kw: Any) -> Tool:
    """A Workspace ``http`` tool."""
    data: dict[str, Any] = {
        "name": name,
        "description": kw.pop("description", f"The {name} tool."),
        "http": {"method": method, "url": url, **kw.pop("http", {})},
        **kw,
    }
    return Tool.model_validate(data)


def topology(
    name: str, root: str, children: Mapping[str, tuple[str, str]] | None = None
) -> BundleTopology:
    """A topology whose root node is named ``root`` (agent ``root``); ``children`` maps
    node name → (agent name, parent node). Children of the root are leaders, others workers."""
    nodes: list[dict[str, Any]] = [{"name": root, "agentRef": {"name": root}, "role": "root"}]
    for node, (agent_name, parent) in (children or {}).items():
        role = "leader" if parent == root else "worker"
        nodes.append(
            {"name": node, "agentRef": {"name": agent_name}, "role": role, "parent": parent}
        )
    spec = TopologySpec.model_validate({"workspaceRef": {"name": "default"}, "agents": nodes})
    return BundleTopology(name=name, version="v1", spec=spec)


def topology_of(name: str, root_agent: str, description: str = "") -> BundleTopology:
    """A one-node topology whose root node ``root`` runs agent ``root_agent``."""
    spec = TopologySpec.model_validate(
        {
            "workspaceRef": {"name": "default"},
            "description": description,
            "agents": [{"name": "root", "agentRef": {"name": root_agent}, "role": "root"}],
        }
    )
    return BundleTopology(name=name, version="v1", spec=spec)


def bundle(
    *,
    agents: Iterable[BundleAgent],
    skills: Iterable[BundleSkill] = (),
    providers: Iterable[ModelProvider] = (),
    mcp_servers: Iterable[McpServer] = (),
    tools: Iterable[Tool] = (),
    topology: BundleTopology | None = None,
    topologies: Iterable[BundleTopology] = (),
    target: str | None = None,
    governance: Governance | Mapping[str, Any] | None = None,
    input: str = "Do the task.",
    timeout_seconds: int = 60,
    allow_script_execution: bool = False,
    workspace: Mapping[str, Any] | None = None,
    uid: str = "00000000-0000-4000-8000-000000000001",
    correlation_id: str | None = None,
    flow_data_dir: str | None = None,
) -> RunBundle:
    """A valid RunBundle. Without ``topology`` the first agent is the (single) target, unless
    ``target`` names one of ``topologies``."""
    agent_list = list(agents)
    ws: dict[str, Any] = {
        "modelProviders": [p.wire() for p in providers],
        "mcpServers": [s.wire() for s in mcp_servers],
        "tools": [t.wire() for t in tools],
        **(workspace or {}),
    }
    gov = (
        governance
        if isinstance(governance, Governance)
        else Governance.model_validate(dict(governance or {}))
    )
    topology_map = {
        t.name: t for t in ([topology] if topology is not None else []) + list(topologies)
    }
    is_topology = topology is not None or (target is not None and target in topology_map)
    return RunBundle(
        run=RunInfo(
            name="test-run",
            namespace="default",
            uid=uid,
            correlation_id=correlation_id or uid,
            input=input,
            timeout_seconds=timeout_seconds,
        ),
        target_kind="Topology" if is_topology else "Agent",
        target=target or (topology.name if topology is not None else agent_list[0].name),
        topologies=topology_map,
        agents={a.name: a for a in agent_list},
        skills={s.name: s for s in skills},
        workspace=WorkspaceSpec.model_validate(ws),
        workspace_name="default",
        allow_script_execution=allow_script_execution,
        governance=gov,
        flow_data_dir=flow_data_dir,
    )


@dataclass(frozen=True)
class BundleLayout:
    """Paths of a bundle written to disk, as the runner's CLI flags want them."""

    root: Path
    bundle_dir: Path
    skills_dir: Path
    scratch: Path
    termination_log: Path

    def skill_dir(self, name: str) -> Path:
        return self.skills_dir / name

    def cli_args(self) -> list[str]:
        return [
            "--bundle",
            str(self.bundle_dir),
            "--skills-dir",
            str(self.skills_dir),
            "--scratch",
            str(self.scratch),
            "--termination-log",
            str(self.termination_log),
        ]


def write_bundle(b: RunBundle, root: Path) -> BundleLayout:
    """Write ``bundle.json`` and every skill's files (``SKILL.md`` included) under ``root``."""
    layout = BundleLayout(
        root=root,
        bundle_dir=root / "bundle",
        skills_dir=root / "skills",
        scratch=root / "scratch",
        termination_log=root / "termination-log",
    )
    layout.bundle_dir.mkdir(parents=True, exist_ok=True)
    layout.scratch.mkdir(parents=True, exist_ok=True)
    (layout.bundle_dir / BUNDLE_FILE).write_text(b.to_json(), encoding="utf-8")
    for s in b.skills.values():
        directory = layout.skill_dir(s.name)
        directory.mkdir(parents=True, exist_ok=True)
        front = f"---\nname: {s.name}\ndescription: {s.spec.description}\n---\n"
        (directory / "SKILL.md").write_text(front + s.spec.instructions, encoding="utf-8")
        for f in s.spec.files:
            target = directory / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f.content or "", encoding="utf-8")
    return layout


#: The seeds' ``code-quality-review`` decision skill's outputs schema, verbatim.
CODE_QUALITY_OUTPUTS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["pass", "fail", "needs-changes"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "reasoning": {"type": "string"},
        "issues": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "file": {"type": "string"},
                    "line": {"type": "integer"},
                    "severity": {"type": "string", "enum": ["error", "warning", "info"]},
                    "message": {"type": "string"},
                },
            },
        },
    },
    "required": ["verdict", "confidence", "reasoning"],
}


def decision_skill(
    name: str,
    implementation: Mapping[str, Any],
    outputs: Mapping[str, Any] | None = None,
    **kw: Any,
) -> BundleSkill:
    """A ``decision`` skill (default outputs: the seeds' code-quality-review schema)."""
    return skill(
        name,
        category="decision",
        implementation=implementation,
        outputs=outputs or CODE_QUALITY_OUTPUTS,
        **kw,
    )
