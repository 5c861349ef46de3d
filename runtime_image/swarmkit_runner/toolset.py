"""An agent's catalog, built without a model loop: what a Run offers and a gateway serves.

:func:`agent_catalog` assembles the default-deny :class:`~.catalog.ToolCatalog` of one agent
from its grants: a tool per granted skill (:mod:`.pipeline`), ``load_skill`` /
``read_skill_file`` (and ``run_skill_script`` for approved, pin-verified scripts), the listed
``tools`` (MCP ``<prefix>.<tool>``, Workspace HTTP tools, platform builtins), enabled native
tools, ``read_flow_data`` and ``pack:`` commands. The agent loop adds its topology
delegates (``extra``); the MCP gateway (:mod:`.gateway`) serves the same catalog.
:func:`needed_servers` is the set of MCP servers a bundle's agents reference.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from swarmkit_api.bundle import BundleAgent, BundleSkill, RunBundle
from swarmkit_api.workspace import McpServer, Tool

from .builtins import builtin_tool, is_builtin
from .catalog import ToolCatalog, ToolEntry
from .commands import command_tools
from .context import RunContext
from .errors import ToolRefused
from .flowdata import flow_data_tool
from .http_tools import http_tool
from .native import native_tools
from .permissions import Gate, guard, mcp_layer
from .pipeline import approval, skill_tools
from .scripts import approved_scripts, script_tool
from .skills import disclosure_tools, granted_skills, system_prompt


def agent_catalog(
    ctx: RunContext, agent: BundleAgent, extra: Iterable[ToolEntry] = ()
) -> tuple[ToolCatalog, list[BundleSkill], str]:
    """The agent's catalog (default-deny), its granted skills and its full system prompt."""
    catalog = ToolCatalog(agent.name, ctx.audit, ctx.stats)
    skills = granted_skills(ctx, agent)
    approved = approved_scripts(ctx, skills)
    entries: list[ToolEntry] = []
    entries += skill_tools(ctx, agent, skills)
    entries += disclosure_tools(ctx, agent, skills, set(approved))
    script = script_tool(ctx, agent, skills, approved)
    if script is not None:
        entries.append(script)
    entries += listed_tools(ctx, agent)
    entries += native_tools(ctx, agent)
    flow = flow_data_tool(ctx, agent)
    if flow is not None:
        entries.append(flow)
    entries += command_tools(ctx, agent)
    entries += extra
    for entry in entries:
        catalog.add(entry)
    return catalog, skills, system_prompt(agent.spec.system_prompt, skills)


def needed_servers(bundle: RunBundle) -> list[McpServer]:
    """The MCP servers the run's agents reference (listed tools or mcp_tool skills, child
    topologies and composed skills' components included: the bundle carries exactly them)."""
    by_prefix = {s.tool_prefix: s.id for s in bundle.workspace.mcp_servers}
    wanted: set[str] = set()
    for agent in bundle.agents.values():
        for name in agent.spec.tools:
            if "." in name and name.split(".", 1)[0] in by_prefix:
                wanted.add(by_prefix[name.split(".", 1)[0]])
        grants = set(agent.skills or agent.spec.skills)
        for skill in bundle.skills.values():
            impl = skill.spec.implementation
            if (
                impl is not None
                and impl.type == "mcp_tool"
                and impl.server
                and (skill.name in grants or _is_component(bundle, skill.name))
            ):
                wanted.add(impl.server)
    return [s for s in bundle.workspace.mcp_servers if s.id in wanted]


def _is_component(bundle: RunBundle, name: str) -> bool:
    return any(
        s.spec.implementation is not None and name in (s.spec.implementation.composes or ())
        for s in bundle.skills.values()
    )


def listed_tools(ctx: RunContext, agent: BundleAgent) -> list[ToolEntry]:
    """The agent's ``tools``: MCP ``prefix.tool``, Workspace tools, platform builtins."""
    workspace_tools = {t.name: t for t in ctx.bundle.workspace.tools}
    entries = (_listed_tool(ctx, agent, name, workspace_tools) for name in agent.spec.tools)
    return [entry for entry in entries if entry is not None]


def _listed_tool(
    ctx: RunContext, agent: BundleAgent, name: str, workspace_tools: dict[str, Tool]
) -> ToolEntry | None:
    """One listed tool, or None (warned once) when it cannot be offered."""
    warn_key = f"tool:{agent.name}:{name}"
    if "." in name:
        return _mcp_tool(ctx, agent, name)
    if name in workspace_tools:
        spec = workspace_tools[name]
        if spec.handler_type == "http":
            return http_tool(ctx, spec, agent)
        if spec.handler_type == "platform_builtin" and is_builtin(name):
            return builtin_tool(ctx, agent, name)
        ctx.warn_once(
            warn_key,
            f"tool {name} (handlerType {spec.handler_type}) cannot be served: reference "
            "MCP tools as <prefix>.<tool>",
            agent=agent.name,
            tool=name,
        )
        return None
    if is_builtin(name):
        return builtin_tool(ctx, agent, name)
    ctx.warn_once(
        warn_key,
        f"agent {agent.name} lists unknown tool {name!r}; it is not offered",
        agent=agent.name,
        tool=name,
    )
    return None


def _mcp_tool(ctx: RunContext, agent: BundleAgent, name: str) -> ToolEntry | None:
    """``prefix.tool``: the discovered MCP tool behind its server's tier (a strict tier asks
    for approval), or None when the server or the tool is not there."""
    warn_key = f"tool:{agent.name}:{name}"
    prefix, tool = name.split(".", 1)
    mcp = ctx.mcp
    server = mcp.server_for_prefix(prefix) if mcp is not None else None
    if server is None or mcp is None:
        ctx.warn_once(
            warn_key,
            f"agent {agent.name} lists {name}, but no MCP server has prefix {prefix!r}",
            agent=agent.name,
            tool=name,
        )
        return None
    if not mcp.available(server):
        return None  # mcp.unavailable already audited
    discovered = mcp.tools(server).get(tool)
    if discovered is None:
        ctx.warn_once(
            warn_key,
            f"agent {agent.name} lists {name}, but MCP server {server} has no tool {tool!r}",
            agent=agent.name,
            tool=name,
        )
        return None

    async def call_mcp(args: dict[str, Any]) -> str:
        return await mcp.call(server, tool, args)

    layer, effects = mcp_layer(mcp.server(server), tool)
    gate = Gate(layers=(layer,), effects=effects)

    async def approve(refused: ToolRefused, args: dict[str, Any]) -> str | None:
        return await approval(ctx, agent, refused, name, args)

    return ToolEntry(
        name,
        discovered.description or name,
        discovered.input_schema,
        "mcp",
        guard(agent, gate, call_mcp, approve),
        gate=gate,
    )
