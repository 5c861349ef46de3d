"""The agent loop, the per-agent catalog assembly and in-process delegation.

One loop per agent invocation: system prompt (+ level-1 skill catalog) → model → tool calls
→ results → model … until the model answers without tool calls. Limits come from the
Workspace governance: ``maxStepsPerAgent`` (capped further by the agent's ``maxSteps``),
``maxStepsPerRun`` and ``maxTokensPerRun``; hitting one raises :class:`LimitExceeded`, which
ends the whole run. Topology children are offered as ``delegate_to_<node>`` tools that run
the child's own loop in-process with the task text and return its final answer. An agent
with an ``outputSchema`` must answer with matching JSON: it is re-asked with field-specific
problems (twice), then the run fails. A child run (an agent skill running a local topology,
:mod:`.agents`) uses its own :class:`AgentRunner` on a child :class:`RunContext`; the model
providers are pooled per run.
"""

from __future__ import annotations

import time
from typing import Any

from swarmkit_api.bundle import BundleAgent, RunBundle
from swarmkit_api.workspace import McpServer, ModelProvider

from . import executors
from .builtins import builtin_tool, is_builtin
from .bundle import children, provider_for
from .catalog import ToolCatalog, ToolEntry
from .commands import command_tools
from .context import RunContext
from .decision import OutputInvalid
from .errors import LimitExceeded, RunFailed
from .flowdata import flow_data_tool
from .http_tools import http_tool
from .mcp_client import McpManager
from .native import native_tools
from .output import OUTPUT_RETRIES, answer_problems, feedback
from .permissions import Gate, guard, mcp_layer
from .pipeline import skill_tools
from .position import AgentPosition
from .providers import (
    AssistantMessage,
    Message,
    ModelRequest,
    Provider,
    ToolResults,
    UserMessage,
)
from .providers.base import RetryHook
from .scripts import approved_scripts, script_tool
from .skills import disclosure_tools, granted_skills, system_prompt

executors.register_all()

DELEGATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What the agent should do."}},
    "required": ["task"],
    "additionalProperties": False,
}


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
    entries: list[ToolEntry] = []
    for name in agent.spec.tools:
        warn_key = f"tool:{agent.name}:{name}"
        if "." in name:
            prefix, tool = name.split(".", 1)
            server = ctx.mcp.server_for_prefix(prefix) if ctx.mcp is not None else None
            if server is None or ctx.mcp is None:
                ctx.warn_once(
                    warn_key,
                    f"agent {agent.name} lists {name}, but no MCP server has prefix {prefix!r}",
                    agent=agent.name,
                    tool=name,
                )
                continue
            if not ctx.mcp.available(server):
                continue  # mcp.unavailable already audited
            discovered = ctx.mcp.tools(server).get(tool)
            if discovered is None:
                ctx.warn_once(
                    warn_key,
                    f"agent {agent.name} lists {name}, but MCP server {server} has no tool "
                    f"{tool!r}",
                    agent=agent.name,
                    tool=name,
                )
                continue
            mcp = ctx.mcp

            async def call_mcp(
                args: dict[str, Any],
                _mcp: McpManager = mcp,
                _server: str = server,
                _tool: str = tool,
            ) -> str:
                return await _mcp.call(_server, _tool, args)

            layer, effects = mcp_layer(mcp.server(server), tool)
            gate = Gate(layers=(layer,), effects=effects)
            entries.append(
                ToolEntry(
                    name,
                    discovered.description or name,
                    discovered.input_schema,
                    "mcp",
                    guard(agent, gate, call_mcp),
                    gate=gate,
                )
            )
        elif name in workspace_tools:
            spec = workspace_tools[name]
            if spec.handler_type == "http":
                entries.append(http_tool(ctx, spec, agent))
            elif spec.handler_type == "platform_builtin" and is_builtin(name):
                entry = builtin_tool(ctx, agent, name)
                if entry is not None:
                    entries.append(entry)
            else:
                ctx.warn_once(
                    warn_key,
                    f"tool {name} (handlerType {spec.handler_type}) cannot be served: reference "
                    "MCP tools as <prefix>.<tool>",
                    agent=agent.name,
                    tool=name,
                )
        elif is_builtin(name):
            entry = builtin_tool(ctx, agent, name)
            if entry is not None:
                entries.append(entry)
        else:
            ctx.warn_once(
                warn_key,
                f"agent {agent.name} lists unknown tool {name!r}; it is not offered",
                agent=agent.name,
                tool=name,
            )
    return entries


class AgentRunner:
    """Runs agents of one run (root and delegated children) against a shared budget."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        # Child runs (agent skills running a local topology) get a loop of their own from
        # the context; the executors cannot import this module, which imports them.
        ctx.shared.loop_factory = AgentRunner

    def provider(self, agent: BundleAgent) -> Provider:
        config = provider_for(self.ctx.bundle, agent)
        model = (agent.spec.model.name if agent.spec.model else None) or config.default_model
        return self.ctx.providers.get(config, model or "", agent.spec.replay, self.retry_hook)

    def retry_hook(self, config: ModelProvider, model: str) -> RetryHook:
        audit = self.ctx.audit

        def on_retry(attempt: int, reason: str, delay: float) -> None:
            audit.emit(
                "model.retry",
                provider=config.name,
                model=model,
                attempt=attempt,
                reason=reason,
                delay_s=round(delay, 3),
            )

        return on_retry

    async def aclose(self) -> None:
        """Providers are pooled on the run context and closed with it."""

    def build_catalog(self, position: AgentPosition, depth: int) -> tuple[ToolCatalog, str]:
        """The agent's catalog (default-deny) and its full system prompt."""
        ctx = self.ctx
        agent = position.agent
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
        for child in children(ctx.bundle, position):
            entries.append(self._delegate_tool(child, depth))
        for entry in entries:
            catalog.add(entry)
        return catalog, system_prompt(agent.spec.system_prompt, skills)

    def _delegate_tool(self, child: AgentPosition, depth: int) -> ToolEntry:
        assert child.node is not None
        node = child.node.name
        description = (
            f"Delegate a task to {node} (agent {child.agent.name}) and get its final answer."
        )
        if child.agent.spec.description:
            description += f" {child.agent.spec.description}"

        async def delegate(args: dict[str, Any]) -> str:
            task = args.get("task")
            if not isinstance(task, str):
                task = str(task or "")
            return await self.run_agent(child, task, depth + 1)

        return ToolEntry(f"delegate_to_{node}", description, DELEGATE_SCHEMA, "delegate", delegate)

    async def run_agent(
        self,
        position: AgentPosition,
        task: str,
        depth: int = 0,
        output_schema: dict[str, Any] | None = None,
        output_retries: int = OUTPUT_RETRIES,
        for_skill: str | None = None,
    ) -> str:
        """Run one agent until its final answer; returns it.

        ``output_schema`` (default: the agent's ``outputSchema``) is enforced on the answer
        with ``output_retries`` re-asks. Past them the run fails, or, when the agent answers
        for a skill (``for_skill``, a decision agent skill), :class:`OutputInvalid` is raised
        so the skill's onFailure decides.
        """
        ctx = self.ctx
        agent = position.agent
        governance = ctx.bundle.governance
        max_steps = governance.max_steps_per_agent
        if agent.spec.max_steps is not None:
            max_steps = min(max_steps, agent.spec.max_steps)
        provider = self.provider(agent)
        catalog, system = self.build_catalog(position, depth)
        tools = catalog.defs()
        max_tokens = agent.spec.model.max_tokens if agent.spec.model else 4096
        temperature = agent.spec.model.temperature if agent.spec.model else None
        node = position.node.name if position.node else None
        ctx.audit.emit(
            "agent.start",
            agent=agent.name,
            node=node,
            depth=depth,
            version=agent.version,
            tools=catalog.names,
        )
        messages: list[Message] = [UserMessage(task)]
        if output_schema is None and agent.spec.output_schema is not None:
            output_schema = agent.spec.output_schema.as_dict()
        output_attempts = 0
        steps = 0
        started = time.monotonic()
        while True:
            if steps >= max_steps:
                message = (
                    f"agent {agent.name} reached maxStepsPerAgent ({max_steps}) "
                    "without a final answer"
                )
                ctx.audit.emit(
                    "limit.exceeded",
                    agent=agent.name,
                    limit="maxStepsPerAgent",
                    value=max_steps,
                    outcome="LimitExceeded",
                    message=message,
                )
                raise LimitExceeded(message)
            ctx.budget.before_step(ctx.audit, agent.name)
            request = ModelRequest(
                system=system,
                messages=list(messages),
                tools=tools,
                max_tokens=max(1, min(max_tokens, ctx.budget.remaining_tokens)),
                temperature=temperature,
            )
            t0 = time.monotonic()
            try:
                response = await provider.complete(request)
            except Exception as exc:
                ctx.audit.emit(
                    "model.call",
                    agent=agent.name,
                    provider=provider.name,
                    model=provider.model,
                    duration_ms=round((time.monotonic() - t0) * 1000, 1),
                    outcome="error",
                    error=str(exc),
                )
                raise
            steps += 1
            ctx.audit.emit(
                "model.call",
                agent=agent.name,
                provider=provider.name,
                model=provider.model,
                step=steps,
                duration_ms=round((time.monotonic() - t0) * 1000, 1),
                attempts=response.attempts,
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
                tool_calls=len(response.tool_calls),
                stop_reason=response.stop_reason,
                outcome="ok",
            )
            ctx.budget.after_step(ctx.audit, agent.name, response.usage)
            if not response.tool_calls:
                if output_schema is not None:
                    problems = answer_problems(output_schema, response.text)
                    if problems:
                        retry = output_attempts < output_retries
                        ctx.audit.emit(
                            "output.validation_failed",
                            agent=agent.name,
                            skill=for_skill,
                            attempt=output_attempts + 1,
                            problems=problems,
                            outcome="retry" if retry else "failed",
                        )
                        if not retry:
                            if for_skill is not None:
                                raise OutputInvalid(
                                    f"agent {agent.name}'s answer does not match skill "
                                    f"{for_skill}'s outputs after {output_retries} retries: "
                                    f"{'; '.join(problems)}",
                                    problems,
                                )
                            raise RunFailed(
                                f"agent {agent.name}: final answer does not match its "
                                f"outputSchema after {output_retries} retries: {problems[0]}"
                            )
                        output_attempts += 1
                        messages.append(AssistantMessage(response.text))
                        messages.append(UserMessage(feedback(output_schema, problems)))
                        continue
                    if for_skill is None:
                        ctx.audit.emit("output.validated", agent=agent.name, outcome="ok")
                ctx.audit.emit(
                    "agent.end",
                    agent=agent.name,
                    node=node,
                    depth=depth,
                    steps=steps,
                    duration_ms=round((time.monotonic() - started) * 1000, 1),
                    outcome="ok",
                )
                return response.text
            messages.append(AssistantMessage(response.text, list(response.tool_calls)))
            results = [await catalog.call(call) for call in response.tool_calls]
            messages.append(ToolResults(results))
