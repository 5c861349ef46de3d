"""One skill call, governed: refusals, inputs, constraints, decision outputs, onFailure.

Every call of a skill (offered to the agent, or a component of a composed skill) runs here:

1. **Refusals** (:mod:`.permissions`): provenance, ``iam.requiredScopes``, the tiers of the
   skill and of what it calls, effects. A refusal is a ``ToolRefused`` tool error, audited
   as ``tool.refused``, never retried and never subject to ``onFailure``.
2. **Inputs**: arguments are validated against the skill's ``inputs`` schema when it has one
   (an ``InvalidArguments`` tool error the agent can fix; never retried).
3. **Attempts**: each attempt is bounded by ``constraints.timeoutSeconds`` (and the
   executor's own limit, e.g. an agent skill's ``timeoutS``); a failed attempt (tool error,
   timeout, executor error) is retried ``retry.attempts`` times with ``backoff``
   ``exponential`` (0.2 s, 0.4 s, 0.8 s … capped at 30 s), ``linear`` (0.2 s, 0.4 s,
   0.6 s …) or ``none``, each audited as ``skill.retry``. A decision skill's answer is
   checked against ``outputs`` inside the attempt (:mod:`.decision`).
4. **Latency**: a call (all attempts) slower than ``constraints.maxLatencyMs`` is audited
   as ``constraint.violation``; the answer is still used.
5. **onFailure**, once the attempts (or the output re-asks) are exhausted, audited as
   ``skill.failed``:

   * ``fallback`` (the default): the failure goes back to the agent as a ``SkillFailed``
     tool error it can act on;
   * ``retry``: like ``fallback``, after ``retry.attempts`` retries (2 when the skill sets
     no retry policy);
   * ``fail``: the run ends with outcome Failed and the reason;
   * ``escalate_to_human``: the run parks with outcome AwaitingReview and an
     ``escalation`` review item naming the skill, the agent and the failure. On resume the
     decision applies at this call (no attempt is made again): ``answer`` is the skill's
     result, ``approve`` hands the agent the failure (with the reviewer's note) as a tool
     error, ``reject`` fails the run, an expired review takes ``onReviewTimeout``.
     In serve mode (``ctx.shared.ask`` set) the question goes to the caller instead (the A2A
     task is ``input-required``) and the answer is the call's result:
     ``{"status": "answered", "question", "answer"}``.

A ``strict`` tier without a standing approval is not a refusal but a question: the run
parks with an ``approval`` review item (the call, its scrubbed arguments); on resume
``approve`` runs the call, ``answer`` makes the reviewer's text its result, ``reject``
refuses it (``ApprovalRejected``). Every skill call is one journal effect
(:mod:`.journal`), so a resumed run does not call it again. In an MCP gateway session
(``ctx.reviewer`` set) an approval or an escalation does not park: the call waits for the
decision on a Review the gateway opens (:mod:`.gateway_review`), then goes on the same way.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from swarmkit_api.bundle import BundleAgent, BundleSkill, ReviewItem
from swarmkit_api.review import ResumeDecision
from swarmkit_api.skill import Constraints

from . import decision, reviews
from .catalog import EMPTY_OBJECT_SCHEMA, ToolEntry
from .context import RunContext
from .errors import (
    InvalidArguments,
    ReviewUnavailable,
    RunEnded,
    RunFailed,
    ToolError,
    ToolRefused,
)
from .output import schema_problems
from .permissions import Gate, provenance_block, refusal, skill_layer, skill_scopes, widest
from .skills import Interim, SkillTool, executor_for

RETRY_BASE_SECONDS = 0.2
RETRY_MAX_SECONDS = 30.0
#: Retries of ``onFailure: retry`` when the skill sets no retry policy.
DEFAULT_ON_FAILURE_RETRIES = 2
#: Deepest nesting of composed skills.
MAX_COMPOSED_DEPTH = 5


def retry_delay(backoff: str, attempt: int) -> float:
    """Seconds before retry ``attempt`` (1-based)."""
    if backoff == "none":
        return 0.0
    if backoff == "linear":
        return min(RETRY_MAX_SECONDS, RETRY_BASE_SECONDS * attempt)
    return min(RETRY_MAX_SECONDS, RETRY_BASE_SECONDS * 2.0 ** (attempt - 1))


@dataclass(frozen=True)
class Prepared:
    """A skill ready to call: its executor's tool and its gate."""

    skill: BundleSkill
    tool: SkillTool
    gate: Gate


def prepare(ctx: RunContext, agent: BundleAgent, skill: BundleSkill) -> Prepared | None:
    """The skill's executor tool and gate (None: not offered, already warned)."""
    impl = skill.spec.implementation
    if impl is None:
        return None
    executor = executor_for(impl.type)
    if executor is None:
        return None
    tool = executor(ctx, agent, skill)
    if tool is None:
        return None
    declared = [e for e in (impl.effects, tool.effects) if e is not None]
    gate = Gate(
        layers=(skill_layer(skill), *tool.layers),
        effects=widest(declared) if declared else tool.default_effects,
        required_scopes=skill_scopes(skill),
        blocked=provenance_block(ctx.bundle, skill),
    )
    return Prepared(skill, tool, gate)


def _timeout(skill: BundleSkill, tool: SkillTool) -> float | None:
    limits = [float(t) for t in (tool.timeout_seconds,) if t]
    constraints = skill.spec.constraints
    if constraints is not None and constraints.timeout_seconds:
        limits.append(float(constraints.timeout_seconds))
    return min(limits) if limits else None


async def _attempt(
    ctx: RunContext, agent: BundleAgent, prepared: Prepared, args: dict[str, Any]
) -> str:
    """One attempt: the call (bounded), and the decision output check with its re-asks."""
    skill, tool = prepared.skill, prepared.tool
    timeout = _timeout(skill, tool)
    schema = None if tool.validates_output else decision.outputs_schema(skill)
    retries = decision.output_retries(skill)
    problems: list[str] = []
    for n in range(retries + 1):
        call = tool.call(args)
        try:
            text = await (asyncio.wait_for(call, timeout) if timeout else call)
        except TimeoutError:
            raise ToolError(
                f"no result within {timeout:g}s (timeoutSeconds)", "SkillTimedOut"
            ) from None
        if schema is None or isinstance(text, Interim):
            return text
        value, problems = decision.check(schema, text)
        if not problems:
            return decision.audit_valid(ctx, agent.name, skill.name, value, n + 1)
        decision.audit_invalid(ctx, agent.name, skill.name, problems, n + 1, n < retries)
    raise decision.exhausted(skill.name, retries, problems)


async def invoke(
    ctx: RunContext,
    agent: BundleAgent,
    prepared: Prepared,
    args: dict[str, Any],
    via: str | None = None,
) -> str:
    """Call a prepared skill under its gate, constraints and onFailure (module doc); one
    journal effect."""
    return await ctx.journal.effect(
        "skill", lambda: _invoke(ctx, agent, prepared, args, via), str, str
    )


async def approval(
    ctx: RunContext,
    agent: BundleAgent,
    refused: ToolRefused,
    tool: str,
    args: dict[str, Any],
    skill: BundleSkill | None = None,
) -> str | None:
    """A strict tier's per-call approval: None = approved (go on), a text = the reviewer's
    answer stands in for the call's result; raises on reject / expiry; parks when asked
    for the first time."""
    found = reviews.decision(ctx, "approval")
    question = f"{refused.message}. Approve this call of {tool} by agent {agent.name}?"
    if found is None and reviews.can_ask_reviewer(ctx):
        # A gateway session: the call waits for a person on a Review it opens itself.
        try:
            found = await reviews.ask_reviewer(
                ctx,
                "approval",
                question,
                agent=agent.name,
                skill=skill,
                tool=tool,
                args=args,
                context=refused.message,
            )
        except ReviewUnavailable as exc:
            message = f"{refused.message}; no person can be asked: {exc}"
            raise ToolRefused(message, refused.code) from None
    if found is None:
        if not ctx.can_park or ctx.shared.ask is not None:
            raise refused  # no Run to park (serve mode): a refusal
        raise reviews.park(
            ctx,
            "approval",
            question,
            agent=agent.name,
            skill=skill,
            tool=tool,
            args=args,
            context=refused.message,
        )
    if found.verdict == "approve":
        return None
    if found.verdict == "answer":
        return found.text
    if found.verdict == "timeout":
        raise reviews.timed_out(ctx, found, skill, f"call of {tool} not approved")
    raise ToolRefused(f"the call of {tool} was rejected ({reviews.by(found)})", "ApprovalRejected")


async def _invoke(
    ctx: RunContext,
    agent: BundleAgent,
    prepared: Prepared,
    args: dict[str, Any],
    via: str | None = None,
) -> str:
    skill, tool = prepared.skill, prepared.tool
    escalated = reviews.decision(ctx, "escalation")
    if escalated is not None:
        return _escalation_decided(ctx, skill, escalated)
    refused = refusal(prepared.gate, agent)
    if refused is not None:
        if refused.code != "NotApproved":
            raise refused
        answer = await approval(ctx, agent, refused, skill.name, args, skill)
        if answer is not None:
            return answer
    if skill.spec.inputs is not None and not tool.validates_inputs:
        problems = schema_problems(skill.spec.inputs.as_dict(), args)
        if problems:
            raise InvalidArguments("; ".join(problems))
    policy = _RetryPolicy.of(skill.spec.constraints or Constraints())
    outcome = await _attempts(ctx, agent, prepared, args, via, policy)
    if isinstance(outcome, str):
        return outcome
    return await _on_failure(ctx, agent, skill, args, via, policy.on_failure, outcome)


@dataclass(frozen=True)
class _RetryPolicy:
    """A skill's retries and onFailure, from its constraints."""

    on_failure: str
    retries: int
    backoff: str

    @classmethod
    def of(cls, constraints: Constraints) -> _RetryPolicy:
        on_failure = constraints.on_failure or "fallback"
        retries = constraints.retry.attempts if constraints.retry is not None else 0
        if on_failure == "retry" and retries == 0:
            retries = DEFAULT_ON_FAILURE_RETRIES
        backoff = constraints.retry.backoff if constraints.retry is not None else "exponential"
        return cls(on_failure, retries, backoff)


@dataclass(frozen=True)
class _Failed:
    """A call whose attempts (or output re-asks) are exhausted."""

    attempts: int
    reason: str


async def _attempts(
    ctx: RunContext,
    agent: BundleAgent,
    prepared: Prepared,
    args: dict[str, Any],
    via: str | None,
    policy: _RetryPolicy,
) -> str | _Failed:
    """The call's answer, or how it failed once its retries are spent; the latency of all
    attempts is checked either way."""
    skill = prepared.skill
    started = time.monotonic()
    attempt = 0
    reason = ""
    try:
        while True:
            attempt += 1
            try:
                return await _attempt(ctx, agent, prepared, args)
            except (RunEnded, ToolRefused, InvalidArguments):
                raise
            except decision.OutputInvalid as exc:
                reason = str(exc)
                break  # the output re-asks were this call's retries
            except ToolError as exc:
                reason = str(exc)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an executor bug or a transport error
                reason = f"{type(exc).__name__}: {exc}"
            if attempt > policy.retries:
                break
            delay = retry_delay(policy.backoff, attempt)
            ctx.audit.emit(
                "skill.retry",
                agent=agent.name,
                skill=skill.name,
                via=via,
                attempt=attempt,
                backoff=policy.backoff,
                delay_s=round(delay, 3),
                reason=reason,
            )
            await asyncio.sleep(delay)
    finally:
        _check_latency(ctx, agent, skill, started, via)
    return _Failed(attempt, reason)


async def _on_failure(
    ctx: RunContext,
    agent: BundleAgent,
    skill: BundleSkill,
    args: dict[str, Any],
    via: str | None,
    on_failure: str,
    failed: _Failed,
) -> str:
    """Apply ``onFailure`` to a failed call: fail the run, escalate to a person, or hand the
    agent a ``SkillFailed`` tool error (fallback, retry, or an escalation nobody can take)."""
    reason = failed.reason
    ctx.audit.emit(
        "skill.failed",
        agent=agent.name,
        skill=skill.name,
        via=via,
        attempts=failed.attempts,
        on_failure=on_failure,
        reason=reason,
        outcome="failed",
    )
    tries = f"after {failed.attempts} attempt{'s' if failed.attempts != 1 else ''}"
    if on_failure == "fail":
        raise RunFailed(f"skill {skill.name} failed {tries} (onFailure: fail): {reason}")
    if on_failure == "escalate_to_human" and reviews.can_ask_reviewer(ctx):
        # A gateway session: the call waits for a person on a Review it opens itself.
        try:
            found = await reviews.ask_reviewer(
                ctx,
                "escalation",
                f"skill {skill.name} (agent {agent.name}) failed {tries}: {reason}. Answer "
                "with the result the caller should get, approve to hand it the failure, or "
                "reject.",
                agent=agent.name,
                skill=skill,
                tool=skill.name,
                args=args,
                context=reason,
            )
        except ReviewUnavailable as exc:
            reason += f" (escalate_to_human: no person can be asked: {exc})"
        else:
            return _escalation_decided(ctx, skill, found)
    if on_failure == "escalate_to_human" and ctx.can_park:
        return await _escalate(ctx, agent, skill, args, f"{tries}: {reason}", reason)
    raise ToolError(f"skill {skill.name} failed {tries}: {reason}", "SkillFailed")


async def _escalate(
    ctx: RunContext,
    agent: BundleAgent,
    skill: BundleSkill,
    args: dict[str, Any],
    how: str,
    reason: str,
) -> str:
    """Escalate a failed call in a Run: to the caller in serve mode, else park for a person."""
    failed = f"skill {skill.name} (agent {agent.name}) failed {how}."
    if ctx.shared.ask is not None:
        question = f"{failed} Decide how the run should go on."
        item = ReviewItem(kind="escalation", skill=skill.name, agent=agent.name, question=question)
        answer = await ask_caller(ctx, item)
        return json.dumps({"status": "answered", "question": question, "answer": answer})
    raise reviews.park(
        ctx,
        "escalation",
        f"{failed} Answer with the result the agent should get, approve to hand it the "
        "failure, or reject to fail the run.",
        agent=agent.name,
        skill=skill,
        tool=skill.name,
        args=args,
        context=reason,
    )


async def ask_caller(ctx: RunContext, item: ReviewItem) -> str:
    """Put ``item``'s question to whoever called (serve mode) and return the answer.

    Audited as ``executor.input_request`` and ``executor.input_response`` (``responder:
    caller``). Only called when ``ctx.shared.ask`` is set.
    """
    assert ctx.shared.ask is not None
    ctx.audit.emit(
        "executor.input_request",
        kind=item.kind,
        agent=item.agent,
        skill=item.skill,
        question=item.question,
        policy="caller",
    )
    answer = await ctx.shared.ask(item)
    ctx.audit.emit(
        "executor.input_response",
        agent=item.agent,
        skill=item.skill,
        responder="caller",
        answer=answer,
    )
    return answer


def _escalation_decided(ctx: RunContext, skill: BundleSkill, found: ResumeDecision) -> str:
    """Apply the decision on an escalated skill call (no attempt is made again)."""
    if found.verdict == "answer":
        return found.text
    if found.verdict == "timeout":
        raise reviews.timed_out(ctx, found, skill, f"skill {skill.name} escalated")
    if found.verdict == "reject":
        raise RunFailed(
            f"skill {skill.name} failed; the escalation was rejected ({reviews.by(found)})"
        )
    raise ToolError(
        f"skill {skill.name} failed; a reviewer let the run go on without it ({reviews.by(found)})",
        "SkillFailed",
    )


def _check_latency(
    ctx: RunContext, agent: BundleAgent, skill: BundleSkill, started: float, via: str | None
) -> None:
    constraints = skill.spec.constraints
    if constraints is None or constraints.max_latency_ms is None:
        return
    elapsed = (time.monotonic() - started) * 1000
    if elapsed > constraints.max_latency_ms:
        ctx.audit.emit(
            "constraint.violation",
            agent=agent.name,
            skill=skill.name,
            via=via,
            constraint="maxLatencyMs",
            limit=constraints.max_latency_ms,
            duration_ms=round(elapsed, 1),
            outcome="violation",
        )


def _description(prepared: Prepared, agent: BundleAgent) -> str:
    text = prepared.tool.description
    refused = refusal(prepared.gate, agent)
    if refused is not None:
        text += f" [Not callable here: {refused}]"
    return text


def skill_tools(ctx: RunContext, agent: BundleAgent, skills: list[BundleSkill]) -> list[ToolEntry]:
    """A tool per granted skill that has an implementation (named after the skill)."""
    entries: list[ToolEntry] = []
    for skill in skills:
        prepared = prepare(ctx, agent, skill)
        if prepared is None:
            continue

        async def call(args: dict[str, Any], _p: Prepared = prepared) -> str:
            return await invoke(ctx, agent, _p, args)

        entries.append(
            ToolEntry(
                skill.name,
                _description(prepared, agent),
                prepared.tool.input_schema or EMPTY_OBJECT_SCHEMA,
                "skill",
                call,
                skill=skill.name,
                audit=skill.spec.audit,
                gate=prepared.gate,
            )
        )
    return entries
