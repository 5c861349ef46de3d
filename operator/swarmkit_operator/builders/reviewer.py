"""Is a funnel's reviewer agent read-only? (pure; the Topology's reconcile asks it).

The issue's ``review`` layer is "a reviewer agent (read-only scopes)". A reviewer reads the
artifact and answers findings; nothing it may call should change anything. The Topology
naming a funnel is ``Ready=False`` with reason ``ReviewerNotReadOnly`` when the reviewer
Agent holds anything that is not read-only, naming each offender; the runner refuses such a
call anyway while it runs a reviewer (``swarmkit_runner.readonly``, defence in depth).

"Read-only" is the runner's own permission model (``swarmkit_runner.permissions``), applied
to what the Agent grants before any run:

* a skill is read-only when its implementation's tier is ``readonly`` (the runner then
  allows only calls whose effects are ``read``) or its effects are ``read``: declared, or
  by the runner's defaults when undeclared (``llm_prompt``: read; ``composed``: the widest
  of its components; an ``mcp_tool`` skill: the Workspace's per-tool override; ``agent``
  and ``command``: not read). A skill with approved scripts offers ``run_skill_script``,
  which is not read-only;
* a listed MCP tool (``prefix.tool``): its ``toolOverrides`` entry declares effects
  ``read``, or its tier (override, else the server's) is ``readonly``; a Workspace HTTP
  tool: effects ``read`` or tier ``readonly`` (undeclared effects are ``write``);
  platform builtins (human tasks, messages, schedules) are not;
* native ``bash`` and ``file_io`` are not (``web_search`` is); ``pack:`` grants (command
  packs, every topology of the workspace) are not.

Grants that do not resolve (a missing skill, an unknown tool) are left to the checks that
own them (the Agent's ``Ready``, the runner's startup warnings).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from swarmkit_api.workspace import PLATFORM_BUILTINS, WorkspaceSpec

_RANK = {"read": 0, "write": 1, "unknown": 2}


@dataclass(frozen=True)
class SkillFacts:
    """What the check needs of a Skill's implementation (from the skills index)."""

    type: str | None = None
    effects: str | None = None
    permission: str | None = None
    composes: tuple[str, ...] = ()
    server: str | None = None
    tool: str | None = None
    scripts: int = 0

    @classmethod
    def of(cls, spec: Mapping[str, Any], scripts: int = 0) -> SkillFacts:
        impl = spec.get("implementation") or {}
        if not isinstance(impl, Mapping):
            impl = {}

        def text(key: str) -> str | None:
            value = impl.get(key)
            return value if isinstance(value, str) else None

        composes = impl.get("composes") if isinstance(impl.get("composes"), list) else []
        return cls(
            type=text("type"),
            effects=text("effects"),
            permission=text("permission"),
            composes=tuple(c for c in composes or () if isinstance(c, str)),
            server=text("server"),
            tool=text("tool"),
            scripts=scripts,
        )


def _widest(effects: list[str]) -> str:
    return max(effects, key=lambda e: _RANK.get(e, 2)) if effects else "read"


def _mcp_effects(workspace: WorkspaceSpec | None, server_id: str | None, tool: str) -> str:
    """``read`` when the tool may only read (declared, or a readonly tier), else its effects."""
    server = None
    if workspace is not None:
        server = next((s for s in workspace.mcp_servers if s.id == server_id), None)
    if server is None:
        return "unknown"
    override = next((o for o in server.tool_overrides if o.tool == tool), None)
    tier = override.permission if override is not None and override.permission else None
    if (tier or server.permission) == "readonly":
        return "read"
    return override.effects if override is not None and override.effects else "unknown"


def skill_effects(
    name: str,
    facts_of: Callable[[str], SkillFacts | None],
    workspace: WorkspaceSpec | None,
    seen: frozenset[str] = frozenset(),
) -> str:
    """The effects the runner would give a call of skill ``name`` (a readonly tier: read)."""
    facts = facts_of(name)
    if facts is None or name in seen:
        return "unknown"
    if facts.permission == "readonly":
        return "read"
    if facts.effects is not None:
        return facts.effects
    if facts.type == "llm_prompt":
        return "read"
    if facts.type == "composed":
        inner = seen | {name}
        return _widest([skill_effects(c, facts_of, workspace, inner) for c in facts.composes])
    if facts.type == "mcp_tool" and facts.tool is not None:
        return _mcp_effects(workspace, facts.server, facts.tool)
    return "unknown"


def not_read_only(
    agent_spec: Mapping[str, Any],
    facts_of: Callable[[str], SkillFacts | None],
    workspace: WorkspaceSpec | None,
) -> list[str]:
    """Every grant of the reviewer Agent that is not read-only, named (empty: read-only)."""
    offenders: list[str] = []
    for grant in agent_spec.get("skills") or ():
        if not isinstance(grant, str):
            continue
        if grant.startswith("pack:"):
            offenders.append(f"grant {grant} (command packs and topologies are not read-only)")
            continue
        facts = facts_of(grant)
        if facts is None:
            continue
        effects = skill_effects(grant, facts_of, workspace)
        if effects != "read":
            offenders.append(f"skill {grant} (effects {effects})")
        elif facts.scripts:
            offenders.append(f"skill {grant} (bundles scripts: run_skill_script)")
    tools = {t.name: t for t in workspace.tools} if workspace is not None else {}
    prefixes = {s.tool_prefix: s.id for s in workspace.mcp_servers} if workspace else {}
    for name in agent_spec.get("tools") or ():
        if not isinstance(name, str):
            continue
        if name in PLATFORM_BUILTINS:
            offenders.append(f"builtin tool {name}")
        elif "." in name and name.split(".", 1)[0] in prefixes:
            prefix, tool = name.split(".", 1)
            effects = _mcp_effects(workspace, prefixes[prefix], tool)
            if effects != "read":
                offenders.append(f"MCP tool {name} (effects {effects})")
        elif name in tools:
            http = tools[name]
            if http.permission != "readonly" and (http.effects or "write") != "read":
                offenders.append(f"tool {name} (effects {http.effects or 'write'})")
    native = agent_spec.get("nativeTools") or {}
    if isinstance(native, Mapping):
        offenders += [f"native tool {n}" for n in ("bash", "file_io") if native.get(_camel(n))]
    return offenders


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


__all__ = ["SkillFacts", "not_read_only", "skill_effects"]
