"""The agent loop and in-process delegation (the catalog itself is :mod:`.toolset`).

One loop per agent invocation: system prompt (+ level-1 skill catalog) → model → tool calls
→ results → model … until the model answers without tool calls. Limits come from the
Workspace governance: ``maxStepsPerAgent`` (capped further by the agent's ``maxSteps``),
``maxStepsPerRun`` and ``maxTokensPerRun``; hitting one raises :class:`LimitExceeded`, which
ends the whole run. Topology children are offered as ``delegate_to_<node>`` tools that run
the child's own loop in-process with the task text and return its final answer. An agent
with an ``outputSchema`` must answer with matching JSON: it is re-asked with field-specific
problems (twice), then the run fails. An answer cut at ``maxTokens`` is continued
``model.maxContinuations`` times, then (or when the cut is inside a tool call) the run
fails as ``Truncated`` (:mod:`.model_calls`). A child run (an agent skill running a local topology,
:mod:`.agents`) uses its own :class:`AgentRunner` on a child :class:`RunContext`; the model
providers are pooled per run.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field, replace
from typing import Any

from swarmkit_api.bundle import BundleAgent
from swarmkit_api.workspace import ModelProvider

from . import executors, funnel, traced
from .bundle import children, provider_for
from .catalog import ToolCatalog, ToolEntry
from .context import RunContext
from .decision import OutputInvalid, audit_invalid
from .errors import LimitExceeded, RunFailed, StartupError
from .model_calls import CONTINUE_PROMPT, model_turn, retry_auditor, truncated
from .output import OUTPUT_RETRIES, answer_problems, feedback
from .position import AgentPosition
from .providers import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    Provider,
    ToolCall,
    ToolDef,
    ToolResultItem,
    ToolResults,
    UserMessage,
)
from .providers.base import RetryHook, decode_response, encode_response
from .providers.replay import skip_turn
from .toolset import agent_catalog, listed_tools, needed_servers

__all__ = ["DELEGATE_SCHEMA", "AgentRunner", "listed_tools", "needed_servers"]

executors.register_all()

DELEGATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What the agent should do."}},
    "required": ["task"],
    "additionalProperties": False,
}


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
        return retry_auditor(self.ctx.audit)(config, model)

    async def aclose(self) -> None:
        """Providers are pooled on the run context and closed with it."""

    def build_catalog(self, position: AgentPosition, depth: int) -> tuple[ToolCatalog, str]:
        """The agent's catalog (default-deny, plus its topology delegates) and system prompt."""
        delegates = [self._delegate_tool(c, depth) for c in children(self.ctx.bundle, position)]
        catalog, _skills, system = agent_catalog(self.ctx, position.agent, delegates)
        return catalog, system

    async def _tool_call(self, catalog: ToolCatalog, call: ToolCall) -> ToolResultItem:
        """One tool call as a journal effect (a resumed run does not call it again)."""

        def decode(value: Any) -> ToolResultItem:
            self.ctx.stats.tool_calls += 1
            return ToolResultItem(call.id, call.name, str(value["content"]), bool(value["error"]))

        return await self.ctx.journal.effect(
            "tool",
            lambda: catalog.call(call),
            lambda r: {"content": r.content, "error": r.is_error},
            decode,
        )

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
        """:meth:`_run_agent` in an ``invoke_agent`` span (tracing hook, :mod:`.traced`)."""
        run = self.ctx.bundle.run
        if position.node is not None and position.node.harness is not None:
            return await self._run_harness(position, task, depth)
        with traced.agent_span(
            position.agent.name,
            self.provider(position.agent),
            run.correlation_id or run.uid,
            depth,
        ):
            return await self._run_agent(
                position, task, depth, output_schema, output_retries, for_skill
            )

    async def _run_harness(self, position: AgentPosition, task: str, depth: int) -> str:
        """A harness node (:mod:`.harness.node`, through ``ctx.shared.harness``); a funnel
        on it gates the final answer, a redraft runs the harness again with its prompt."""
        run_harness = self.ctx.shared.harness
        if run_harness is None:
            raise StartupError("this runner process cannot run harness nodes")
        gate = funnel.gate_for(
            self.ctx, position, lambda p, t, schema: self.run_agent(p, t, depth + 1, schema)
        )

        async def answer_to(prompt: str) -> str:
            # One journal effect per harness run: a resumed Run (a funnel approval decided)
            # replays a finished run's answer instead of running the harness again, which
            # would put a new, unapproved draft in the approved one's place. A run that
            # parked mid-way recorded nothing, so it runs again (its tool calls nested here).
            return await self.ctx.journal.effect(
                "harness", lambda: run_harness(self.ctx, position, prompt, depth), str, str
            )

        answer = await answer_to(task)
        while gate is not None:
            assessed = await gate.assess(answer)
            if not isinstance(assessed, funnel.Redraft):
                return assessed
            answer = await answer_to(f"{task}\n\n{assessed.prompt}")
        return answer

    async def _run_agent(
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
        inv = self._invocation(position, depth, output_schema, output_retries, for_skill)
        ctx.audit.emit(
            "agent.start",
            agent=inv.agent.name,
            node=inv.node,
            depth=depth,
            version=inv.agent.version,
            tools=inv.catalog.names,
        )
        # A node bound to a Funnel: every final answer passes its gate (funnel.py).
        gate = funnel.gate_for(
            ctx, position, lambda p, t, schema: self.run_agent(p, t, depth + 1, schema)
        )
        talk = _Conversation([UserMessage(task)])
        started = time.monotonic()
        while True:
            self._check_steps(inv, talk.steps)
            response = await self._model_turn(inv, talk)
            if response.truncated:
                self._continue_cut(inv, talk, response)
                continue
            if talk.parts:
                response = replace(response, text="".join(talk.parts) + response.text)
                talk.parts = []
            if response.tool_calls:
                talk.messages.append(AssistantMessage(response.text, list(response.tool_calls)))
                results = [await self._tool_call(inv.catalog, c) for c in response.tool_calls]
                talk.messages.append(ToolResults(results))
                continue
            if not self._answer_valid(inv, talk, response.text):
                continue
            if gate is not None:
                assessed = await gate.assess(response.text)
                if isinstance(assessed, funnel.Redraft):
                    talk.messages.append(AssistantMessage(response.text))
                    talk.messages.append(UserMessage(assessed.prompt))
                    continue
            ctx.audit.emit(
                "agent.end",
                agent=inv.agent.name,
                node=inv.node,
                depth=depth,
                steps=talk.steps,
                duration_ms=round((time.monotonic() - started) * 1000, 1),
                outcome="ok",
            )
            return response.text

    def _invocation(
        self,
        position: AgentPosition,
        depth: int,
        output_schema: dict[str, Any] | None,
        output_retries: int,
        for_skill: str | None,
    ) -> _Invocation:
        """What one agent invocation runs with: limits, model settings, catalog."""
        ctx = self.ctx
        agent = position.agent
        max_steps = ctx.bundle.governance.max_steps_per_agent
        if agent.spec.max_steps is not None:
            max_steps = min(max_steps, agent.spec.max_steps)
        model = agent.spec.model
        provider = self.provider(agent)
        config = provider_for(ctx.bundle, agent)
        catalog, system = self.build_catalog(position, depth)
        if output_schema is None and agent.spec.output_schema is not None:
            output_schema = agent.spec.output_schema.as_dict()
        return _Invocation(
            agent=agent,
            node=position.node.name if position.node else None,
            provider=provider,
            config=config,
            catalog=catalog,
            system=system,
            tools=catalog.defs(),
            max_steps=max_steps,
            max_tokens=model.max_tokens if model else 4096,
            temperature=model.temperature if model else None,
            max_continuations=model.max_continuations if model else 0,
            output_schema=output_schema,
            output_retries=output_retries,
            for_skill=for_skill,
        )

    def _check_steps(self, inv: _Invocation, steps: int) -> None:
        """maxStepsPerAgent: one more model call would pass it."""
        if steps < inv.max_steps:
            return
        message = (
            f"agent {inv.agent.name} reached maxStepsPerAgent ({inv.max_steps}) "
            "without a final answer"
        )
        self.ctx.audit.emit(
            "limit.exceeded",
            agent=inv.agent.name,
            limit="maxStepsPerAgent",
            value=inv.max_steps,
            outcome="LimitExceeded",
            message=message,
        )
        raise LimitExceeded(message)

    async def _model_turn(self, inv: _Invocation, talk: _Conversation) -> ModelResponse:
        """One model call as a journal effect (a resumed run replays it), a step of the
        run's budget (:func:`.model_calls.model_turn`)."""
        ctx, provider = self.ctx, inv.provider
        request = ModelRequest(
            system=inv.system,
            messages=list(talk.messages),
            tools=inv.tools,
            max_tokens=max(1, min(inv.max_tokens, ctx.budget.remaining_tokens)),
            temperature=inv.temperature,
        )
        response = await model_turn(
            ctx,
            inv.agent.name,
            inv.config,
            provider,
            request,
            lambda: ctx.journal.effect(
                "model",
                functools.partial(traced.chat, provider, request),
                encode_response,
                decode_response,
                lambda _: skip_turn(provider),
            ),
            step=talk.steps + 1,
        )
        talk.steps += 1
        return response

    def _continue_cut(self, inv: _Invocation, talk: _Conversation, response: ModelResponse) -> None:
        """An answer cut at maxTokens: the model sees its partial text and is asked to go on;
        the parts are joined into the one answer. A cut tool call, or one cut too many, fails."""
        if response.tool_calls or talk.continuations >= inv.max_continuations:
            raise truncated(self.ctx, inv.agent.name, response, inv.max_tokens, talk.continuations)
        talk.continuations += 1
        talk.parts.append(response.text)
        talk.messages.append(AssistantMessage(response.text))
        talk.messages.append(UserMessage(CONTINUE_PROMPT))
        self.ctx.audit.emit(
            "model.continued",
            agent=inv.agent.name,
            continuation=talk.continuations,
            of=inv.max_continuations,
            outcome="continue",
        )

    def _answer_valid(self, inv: _Invocation, talk: _Conversation, text: str) -> bool:
        """The final answer against the output schema: True when it matches (or there is
        none); False after adding the problems for a re-ask; past the re-asks the run fails,
        or the skill's onFailure decides (:class:`OutputInvalid`)."""
        agent, schema = inv.agent, inv.output_schema
        if schema is None:
            return True
        problems = answer_problems(schema, text)
        if not problems:
            if inv.for_skill is None:
                self.ctx.audit.emit("output.validated", agent=agent.name, outcome="ok")
            return True
        retry = talk.output_attempts < inv.output_retries
        audit_invalid(
            self.ctx, agent.name, inv.for_skill, problems, talk.output_attempts + 1, retry
        )
        if not retry:
            if inv.for_skill is not None:
                raise OutputInvalid(
                    f"agent {agent.name}'s answer does not match skill "
                    f"{inv.for_skill}'s outputs after {inv.output_retries} retries: "
                    f"{'; '.join(problems)}",
                    problems,
                )
            raise RunFailed(
                f"agent {agent.name}: final answer does not match its "
                f"outputSchema after {inv.output_retries} retries: {problems[0]}"
            )
        talk.output_attempts += 1
        talk.messages.append(AssistantMessage(text))
        talk.messages.append(UserMessage(feedback(schema, problems)))
        return False


@dataclass(frozen=True)
class _Invocation:
    """One agent invocation's fixed inputs, read once before its loop."""

    agent: BundleAgent
    node: str | None
    provider: Provider
    config: ModelProvider
    catalog: ToolCatalog
    system: str
    tools: list[ToolDef]
    max_steps: int
    max_tokens: int
    temperature: float | None
    max_continuations: int
    output_schema: dict[str, Any] | None
    output_retries: int
    for_skill: str | None


@dataclass
class _Conversation:
    """What one agent invocation's loop changes from turn to turn (mutable by design)."""

    messages: list[Message]
    steps: int = 0
    continuations: int = 0
    output_attempts: int = 0
    parts: list[str] = field(default_factory=list)
