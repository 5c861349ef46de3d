"""People in the loop, runner side: parking a call for a review and applying the decision.

Four places ask a person (each a review ``kind``): a skill whose ``onFailure`` is
``escalate_to_human`` (``escalation``), a call through a ``strict`` tier without a standing
approval (``approval``), a remote agent's question under ``onUnanswerable: relay``
(``input_request``) and the ``human_task_request`` builtin (``human_task``). Each calls
:func:`decision` first: on a resumed run, at the very call that parked, it returns what the
person decided (see :mod:`.journal`); otherwise :func:`park` ends the run with outcome
AwaitingReview and the item (the operator turns it into a Review object, the runner never
talks to the API). Every applied decision is audited as ``review.decided`` with who
decided and when (the authenticated user the admission policy checked).

A review that expired arrives as verdict ``timeout``: the skill's ``onReviewTimeout``
(``fail`` by default, or ``fallback``) decides (:func:`timed_out`).

An MCP gateway session has no Run to park: there :func:`ask_reviewer` hands the same item
to the session's reviewer (``ctx.reviewer``, :mod:`.gateway_review`), which opens the
Review itself and waits for the decision; the call then goes on with it like a resumed
run at the call that parked.
"""

from __future__ import annotations

import json
from typing import Any

from swarmkit_api.bundle import BundleSkill, ReviewItem
from swarmkit_api.review import MAX_ARGUMENTS_CHARS, ResumeDecision, ReviewKind

from .audit import AuditLog
from .context import RunContext
from .errors import AwaitingReview, RunFailed, ToolError

#: Longest argument text put in a review item (the result is capped at 4 KiB in all).
ITEM_ARGUMENT_CHARS = 1000


def timeout_seconds(ctx: RunContext, skill: BundleSkill | None) -> int:
    """How long a review may wait: the skill's ``constraints.reviewTimeoutSeconds``, else
    the Workspace's ``governance.reviewTimeoutSeconds``; in a gateway, at most its
    ``reviewTimeoutSeconds`` (an MCP call cannot wait for days)."""
    constraints = skill.spec.constraints if skill is not None else None
    if constraints is not None and constraints.review_timeout_seconds:
        seconds = constraints.review_timeout_seconds
    else:
        seconds = ctx.bundle.governance.review_timeout_seconds
    gateway = ctx.bundle.gateway
    return min(seconds, gateway.review_timeout_seconds) if gateway is not None else seconds


def arguments_text(ctx: RunContext, args: dict[str, Any] | None) -> str | None:
    """The call's arguments as JSON, secrets scrubbed, capped."""
    if args is None:
        return None
    text = ctx.secrets.scrub(json.dumps(args, ensure_ascii=False, sort_keys=True, default=str))
    limit = min(ITEM_ARGUMENT_CHARS, MAX_ARGUMENTS_CHARS)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def decision(ctx: RunContext, kind: ReviewKind) -> ResumeDecision | None:
    """The decision of a ``kind`` review asked right here (resumed runs), or None."""
    found = ctx.journal.decision_here(kind)
    if found is not None and found is ctx.journal.new_decision and not ctx.journal.applied:
        ctx.journal.applied = True
        audit_decided(ctx.audit, found, task_id=found.task_id)
    return found


def audit_decided(audit: AuditLog, found: ResumeDecision, **extra: Any) -> None:
    """The ``review.decided`` audit line, one shape for a resumed Run and a gateway call."""
    audit.emit(
        "review.decided",
        review=found.review,
        kind=found.kind,
        verdict=found.verdict,
        decided_by=found.decided_by,
        decided_at=found.decided_at or None,
        text=found.text or None,
        **extra,
    )


def review_item(
    ctx: RunContext,
    kind: ReviewKind,
    question: str,
    *,
    agent: str,
    skill: BundleSkill | None = None,
    tool: str | None = None,
    args: dict[str, Any] | None = None,
    context: str | None = None,
    task_id: str | None = None,
) -> ReviewItem:
    """The question as a review item: every text secret-scrubbed, arguments capped."""
    return ReviewItem(
        kind=kind,
        skill=skill.name if skill is not None else None,
        agent=agent,
        question=ctx.secrets.scrub(question),
        task_id=task_id,
        tool=tool,
        arguments=arguments_text(ctx, args),
        context=ctx.secrets.scrub(context) if context else None,
        key=ctx.journal.current_key(),
        timeout_seconds=timeout_seconds(ctx, skill),
    )


def can_ask_reviewer(ctx: RunContext) -> bool:
    """Whether a question here waits for a person on a Review (an MCP gateway session)."""
    return ctx.reviewer is not None and ctx.shared.ask is None


async def ask_reviewer(
    ctx: RunContext,
    kind: ReviewKind,
    question: str,
    *,
    agent: str,
    skill: BundleSkill | None = None,
    tool: str | None = None,
    args: dict[str, Any] | None = None,
    context: str | None = None,
) -> ResumeDecision:
    """Open a Review and wait for the decision (only where :func:`can_ask_reviewer`);
    raises ``ReviewUnavailable`` with the reason when no Review can be opened. The
    reviewer audits ``review.requested`` and ``review.decided``."""
    assert ctx.reviewer is not None
    item = review_item(
        ctx, kind, question, agent=agent, skill=skill, tool=tool, args=args, context=context
    )
    return await ctx.reviewer(item)


def park(
    ctx: RunContext,
    kind: ReviewKind,
    question: str,
    *,
    agent: str,
    skill: BundleSkill | None = None,
    tool: str | None = None,
    args: dict[str, Any] | None = None,
    context: str | None = None,
    task_id: str | None = None,
) -> AwaitingReview | ToolError:
    """Audit ``review.requested`` and return the exception that parks the run here (where
    nothing can park, a gateway session or serve mode: a ``NoReviewer`` tool error)."""
    if not ctx.can_park or ctx.shared.ask is not None:
        return ToolError(f"{question} (no person can be asked here: not a Run)", "NoReviewer")
    item = review_item(
        ctx,
        kind,
        question,
        agent=agent,
        skill=skill,
        tool=tool,
        args=args,
        context=context,
        task_id=task_id,
    )
    ctx.audit.emit(
        "review.requested",
        kind=item.kind,
        agent=item.agent,
        skill=item.skill,
        tool=item.tool,
        task_id=item.task_id,
        question=item.question,
        key=item.key,
        timeout_s=item.timeout_seconds,
        outcome="AwaitingReview",
    )
    return AwaitingReview(f"awaiting review: {item.question}", [item])


def timed_out(
    ctx: RunContext, found: ResumeDecision, skill: BundleSkill | None, what: str
) -> Exception:
    """The failure an expired review turns into: ``onReviewTimeout`` fail (default) ends the
    run; fallback hands the agent a tool error."""
    constraints = skill.spec.constraints if skill is not None else None
    policy = (constraints.on_review_timeout if constraints is not None else None) or "fail"
    message = (
        f"{what}: no review decision within {timeout_seconds(ctx, skill)}s "
        f"(review {found.review} expired)"
    )
    if policy == "fallback":
        return ToolError(message, "ReviewTimedOut")
    return RunFailed(message + " (onReviewTimeout: fail)")


def by(found: ResumeDecision) -> str:
    """``<verdict> by <user>[: <text>]`` for tool results and messages."""
    text = f"{found.verdict} by {found.decided_by}"
    return text + (f": {found.text}" if found.text else "")


__all__ = [
    "arguments_text",
    "ask_reviewer",
    "by",
    "can_ask_reviewer",
    "decision",
    "park",
    "review_item",
    "timed_out",
    "timeout_seconds",
]
