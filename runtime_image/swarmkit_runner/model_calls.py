"""What the agent loop and ``llm_prompt`` skills share about a model call.

* :func:`model_turn`, the one model turn of both: the run's step and token budget and its
  spend limit checked first, the call, its ``model.call`` audit line (also when it fails),
  then the spend and the budget counted. The harness node's model proxy streams a turn it
  does not make itself, so it uses the two ends on their own: :func:`check_turn` before
  and :func:`charge_turn` after.
* ``model.call`` audit facts: attempts, the tokens of retried attempts (they are billed
  and counted in the run's usage), whether the turn streamed, time to first token, and
  the stop reason.
* ``model.retry``: one audit line per retry with its reason and the delay waited.
* A truncated answer (cut at ``max_tokens``) is never a success: past its continuations,
  or when the cut is inside a tool call (the arguments may be incomplete, the tool is not
  run), it ends the run as :class:`~.errors.Truncated`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from swarmkit_api.workspace import ModelProvider

from .audit import AuditLog
from .context import RunContext
from .errors import Truncated
from .providers.base import ModelRequest, ModelResponse, Provider, RetryHook, Usage

CONTINUE_PROMPT = (
    "Your answer was cut off at the output token limit. Continue exactly where it stopped, "
    "without repeating anything."
)


def call_facts(response: ModelResponse) -> dict[str, Any]:
    """The ``model.call`` audit fields of a completed call."""
    facts: dict[str, Any] = {
        "attempts": response.attempts,
        "input_tokens": response.usage.input_tokens,
        "output_tokens": response.usage.output_tokens,
        "stop_reason": response.stop_reason,
    }
    if response.retried_usage.total:
        facts["retried_input_tokens"] = response.retried_usage.input_tokens
        facts["retried_output_tokens"] = response.retried_usage.output_tokens
    if response.streamed:
        facts["streamed"] = True
    if response.first_token_ms is not None:
        facts["first_token_ms"] = response.first_token_ms
    return facts


def check_turn(
    ctx: RunContext, agent: str, config: ModelProvider, model: str, max_tokens: int
) -> None:
    """Raise what ends the run when ``agent``'s next model turn may not be made: its step
    and token budget, then the spend cap for up to ``max_tokens`` more (each audited)."""
    ctx.budget.before_step(ctx.audit, agent)
    ctx.budget.spend.check(ctx.audit, agent, config, model, max_tokens)


def charge_turn(
    ctx: RunContext, agent: str, config: ModelProvider, model: str, usage: Usage
) -> None:
    """Count a made turn's ``usage`` once: the spend, then the budget (which raises what
    ends the run when the turn crossed it)."""
    ctx.budget.spend.record(agent, config, model, usage)
    ctx.budget.after_step(ctx.audit, agent, usage)


async def model_turn(
    ctx: RunContext,
    agent: str,
    config: ModelProvider,
    provider: Provider,
    request: ModelRequest,
    call: Callable[[], Awaitable[ModelResponse]],
    *,
    skill: str | None = None,
    step: int | None = None,
) -> ModelResponse:
    """One model turn of ``agent``: ``call()`` (which sends ``request``) inside the run's
    budget and spend limits, audited as ``model.call``.

    ``skill`` names the ``llm_prompt`` skill the turn is for; ``step`` is the agent loop's
    turn number, audited with the turn's tool calls (a skill's turn offers no tools). A
    failed call is audited and raised as it came.
    """
    check_turn(ctx, agent, config, provider.model, request.max_tokens)
    who = {"agent": agent, "skill": skill, "provider": provider.name, "model": provider.model}
    t0 = time.monotonic()
    try:
        response = await call()
    except Exception as exc:
        ctx.audit.emit(
            "model.call",
            **who,
            duration_ms=round((time.monotonic() - t0) * 1000, 1),
            outcome="error",
            error=str(exc),
        )
        raise
    ctx.audit.emit(
        "model.call",
        **who,
        step=step,
        duration_ms=round((time.monotonic() - t0) * 1000, 1),
        tool_calls=None if step is None else len(response.tool_calls),
        outcome="Truncated" if response.truncated else "ok",
        **call_facts(response),
    )
    charge_turn(ctx, agent, config, provider.model, response.usage)
    return response


def retry_auditor(audit: AuditLog) -> Callable[[ModelProvider, str], RetryHook]:
    """The retry hook factory for the provider pool: a ``model.retry`` line per retry."""

    def for_provider(config: ModelProvider, model: str) -> RetryHook:
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

    return for_provider


def truncated(
    ctx: RunContext, agent: str, response: ModelResponse, max_tokens: int, continuations: int
) -> Truncated:
    """The error (audited as ``model.truncated``) for an answer cut at ``max_tokens``."""
    where = "inside a tool call" if response.tool_calls else "in the final answer"
    message = (
        f"Truncated: agent {agent}'s answer was cut off at maxTokens={max_tokens} {where} "
        f"(stop reason {response.stop_reason or 'unknown'}"
        + (f", after {continuations} continuation(s)" if continuations else "")
        + "); raise spec.model.maxTokens"
        + ("" if response.tool_calls else " or spec.model.maxContinuations")
    )
    ctx.audit.emit("model.truncated", agent=agent, outcome="Truncated", message=message)
    return Truncated(message)
