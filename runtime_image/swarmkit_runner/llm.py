"""``llm_prompt`` skills: one tool-less model conversation with the skill's own prompt.

* The system prompt is the skill's ``prompt``; a decision skill's adds the instruction to
  answer only with JSON matching its ``outputs`` (and the schema itself).
* The user message is the call's ``input`` (plus ``context`` when given) when those are the
  only arguments, otherwise the arguments as JSON.
* The model: ``implementation.model`` as ``provider/model`` (a Workspace ``modelProviders``
  name, then the model) or ``model`` (on the calling agent's provider); omitted = the
  calling agent's provider and model. ``max_tokens`` and temperature are the caller's.
* Turns count against the run's ``maxStepsPerRun`` / ``maxTokensPerRun`` and are audited as
  ``model.call`` with the skill's name. A model API failure (after the provider's retries)
  is a failure of the skill call (its ``onFailure`` decides), not of the run; so is an
  answer cut at ``max_tokens`` (``Truncated``) or refused by the model (``ModelError``).
* A decision skill's answer is checked against ``outputs``; the problems go back to the
  same model in the same conversation (``constraints.outputRetries`` times, default 2).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from swarmkit_api.bundle import BundleAgent, BundleSkill
from swarmkit_api.workspace import ModelProvider

from . import decision, traced
from .bundle import provider_for
from .context import RunContext
from .errors import ModelError, ToolError
from .model_calls import model_turn, retry_auditor
from .providers import AssistantMessage, Message, ModelRequest, Provider, UserMessage
from .skills import SkillTool

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "input": {"type": "string", "description": "What the skill should work on."},
        "context": {"type": "string", "description": "Optional background."},
    },
    "required": ["input"],
}


def resolve_model(
    ctx: RunContext, agent: BundleAgent, override: str | None
) -> tuple[ModelProvider, str]:
    """(provider, model) for an ``llm_prompt`` skill called by ``agent``."""
    base = provider_for(ctx.bundle, agent)
    agent_model = (agent.spec.model.name if agent.spec.model else None) or base.default_model
    if not override:
        return base, agent_model or ""
    head, sep, rest = override.partition("/")
    if sep:
        for provider in ctx.bundle.workspace.model_providers:
            if provider.name == head:
                return provider, rest or provider.default_model or ""
    return base, override


def user_text(args: dict[str, Any]) -> str:
    if set(args) <= {"input", "context"} and isinstance(args.get("input"), str):
        text = str(args["input"])
        if isinstance(args.get("context"), str) and args["context"]:
            text += f"\n\nContext:\n{args['context']}"
        return text
    return json.dumps(args, ensure_ascii=False)


def system_for(skill: BundleSkill, schema: dict[str, Any] | None) -> str:
    impl = skill.spec.implementation
    assert impl is not None
    system = (impl.prompt or "").rstrip()
    if schema is not None:
        system += (
            "\n\nAnswer only with JSON (no prose, no code fence) matching this JSON Schema:\n"
            + json.dumps(schema)
        )
    return system


async def complete(
    ctx: RunContext,
    agent: BundleAgent,
    skill: BundleSkill,
    provider: Provider,
    request: ModelRequest,
    config: ModelProvider,
) -> str:
    """One model turn for the skill (:func:`.model_calls.model_turn`: budget, audit, in a
    ``chat`` span and counted in the GenAI metrics, like the agent loop's), errors as tool
    errors."""
    try:
        response = await model_turn(
            ctx,
            agent.name,
            config,
            provider,
            request,
            functools.partial(traced.chat, provider, request),
            skill=skill.name,
        )
    except ModelError as exc:
        raise ToolError(str(exc), "ModelError") from None
    if response.truncated:
        # A cut answer is never the skill's result (a decision would parse half a JSON).
        raise ToolError(
            f"skill {skill.name}: the answer was cut off at max_tokens={request.max_tokens} "
            f"(stop reason {response.stop_reason})",
            "Truncated",
        )
    return response.text


def llm_prompt_executor(ctx: RunContext, agent: BundleAgent, skill: BundleSkill) -> SkillTool:
    impl = skill.spec.implementation
    assert impl is not None
    schema = decision.outputs_schema(skill)
    retries = decision.output_retries(skill)
    max_tokens = agent.spec.model.max_tokens if agent.spec.model else 4096
    temperature = agent.spec.model.temperature if agent.spec.model else None

    async def call(args: dict[str, Any]) -> str:
        config, model = resolve_model(ctx, agent, impl.model)
        if config.type == "replay":
            raise ToolError(
                f"skill {skill.name}: llm_prompt skills need a model API; provider "
                f"{config.name} only replays scripted agent turns",
                "NotSupported",
            )
        provider = ctx.providers.get(config, model, (), retry_auditor(ctx.audit))
        messages: list[Message] = [UserMessage(user_text(args))]
        problems: list[str] = []
        for attempt in range(retries + 1):
            request = ModelRequest(
                system=system_for(skill, schema),
                messages=list(messages),
                tools=[],
                max_tokens=max(1, min(max_tokens, ctx.budget.remaining_tokens)),
                temperature=temperature,
            )
            text = await complete(ctx, agent, skill, provider, request, config)
            if schema is None:
                return text
            value, problems = decision.check(schema, text)
            if not problems:
                return decision.audit_valid(ctx, agent.name, skill.name, value, attempt + 1)
            decision.audit_invalid(
                ctx, agent.name, skill.name, problems, attempt + 1, attempt < retries
            )
            messages.append(AssistantMessage(text))
            messages.append(UserMessage(decision.feedback(schema, problems)))
        raise decision.exhausted(skill.name, retries, problems)

    schema_in = skill.spec.inputs.as_dict() if skill.spec.inputs is not None else INPUT_SCHEMA
    return SkillTool(
        skill.spec.description,
        schema_in,
        call,
        default_effects="read",
        validates_output=True,
    )
