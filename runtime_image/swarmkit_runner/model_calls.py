"""What the agent loop and ``llm_prompt`` skills share about a model call's outcome.

* ``model.call`` audit facts: attempts, the tokens of retried attempts (they are billed
  and counted in the run's usage), whether the turn streamed, time to first token, and
  the stop reason.
* ``model.retry``: one audit line per retry with its reason and the delay waited.
* A truncated answer (cut at ``max_tokens``) is never a success: past its continuations,
  or when the cut is inside a tool call (the arguments may be incomplete, the tool is not
  run), it ends the run as :class:`~.errors.Truncated`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from swarmkit_api.workspace import ModelProvider

from .audit import AuditLog
from .context import RunContext
from .errors import Truncated
from .providers.base import ModelResponse, RetryHook

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
