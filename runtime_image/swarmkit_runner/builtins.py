"""Platform builtin tools, each gated by the permission of the same name.

``agent_message`` and ``mailbox_send`` need no permission. They and ``schedule`` record an
effect in the run's outbox that the operator materializes once when the run ends or parks
(a Run of another agent, a MailboxMessage, a Run that starts later): see :mod:`.effects`.
``approve_spend`` records one too: a Run this run started may start past a budget hold
(:mod:`.spend_approval`).

``human_task_request {title, details?}`` opens a task for a person and waits on the result:
the run parks with a ``human_task`` review item (the operator makes it a Review), and the
resumed run gets ``{task, verdict, text, decidedBy, decidedAt}`` as the tool result (an
expired task: a ``ReviewTimedOut`` tool error). ``human_task_decide {task?}`` returns the
decision a person recorded on a task of this run (the latest one when ``task`` is
omitted): who may decide is the cluster's RBAC and admission policy, never an agent, so an
agent holding ``human_task_decide`` reads and acts on decisions, it does not forge them.
"""

from __future__ import annotations

from typing import Any

from swarmkit_api.bundle import BundleAgent
from swarmkit_api.review import ResumeDecision
from swarmkit_api.workspace import PLATFORM_BUILTINS

from . import effects, reviews, spend_approval
from .catalog import ToolEntry, as_text
from .context import RunContext
from .errors import ToolError

_GENERIC_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
_TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "description": "What the person must decide or do."},
        "details": {"type": "string", "description": "Context the person needs."},
    },
    "required": ["title"],
}
_DECIDE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "The task (Review) name."}},
}
_DESCRIPTIONS = {
    "agent_message": "Send a message to another agent: it runs with the message as its "
    "input (after this run ends or pauses).",
    "mailbox_send": "Put a message in a named mailbox that people read and acknowledge.",
    "human_task_request": "Open a task for a human and wait for the result.",
    "human_task_decide": "Read the decision a person recorded on a task of this run.",
    "schedule": "Schedule a future timer event: a later run of a topology with the given input.",
}


def is_builtin(name: str) -> bool:
    return name in PLATFORM_BUILTINS


def builtin_tool(ctx: RunContext, agent: BundleAgent, name: str) -> ToolEntry | None:
    """The builtin ``name`` if the agent holds its permission (None otherwise, warned)."""
    permission = PLATFORM_BUILTINS[name]
    if permission is not None and permission not in agent.permissions:
        ctx.warn_once(
            f"builtin:{agent.name}:{name}",
            f"agent {agent.name} lists {name} but lacks the {permission!r} permission; "
            "the tool is not offered",
            agent=agent.name,
            tool=name,
        )
        return None
    if name == "approve_spend":
        handle = spend_approval.handler(ctx, agent)
        return ToolEntry(name, spend_approval.DESCRIPTION, spend_approval.SCHEMA, "builtin", handle)
    if name in effects.HANDLERS:
        make, schema = effects.HANDLERS[name]
        return ToolEntry(name, _DESCRIPTIONS[name], schema, "builtin", make(ctx, agent))

    if name == "human_task_request":

        async def request(args: dict[str, Any]) -> str:
            found = reviews.decision(ctx, "human_task")
            if found is None:
                title = str(args.get("title") or "").strip()
                if not title:
                    raise ToolError("title is required", "InvalidArguments")
                details = args.get("details")
                raise reviews.park(
                    ctx,
                    "human_task",
                    title,
                    agent=agent.name,
                    tool=name,
                    args=args,
                    context=str(details) if details else None,
                )
            if found.verdict == "timeout":
                raise ToolError(f"nobody decided task {found.review} in time", "ReviewTimedOut")
            return as_text(_decision_view(found))

        return ToolEntry(name, _DESCRIPTIONS[name], _TASK_SCHEMA, "builtin", request)
    if name == "human_task_decide":

        async def decided(args: dict[str, Any]) -> str:
            task = args.get("task")
            done = [d for d in ctx.journal.decisions if d.kind == "human_task"]
            if task:
                done = [d for d in done if d.review == task]
            if not done:
                raise ToolError(
                    f"no decision recorded on {'task ' + str(task) if task else 'any task'} "
                    "of this run",
                    "NoDecision",
                )
            return as_text(_decision_view(done[-1]))

        return ToolEntry(name, _DESCRIPTIONS[name], _DECIDE_SCHEMA, "builtin", decided)

    async def unsupported(args: dict[str, Any]) -> str:
        raise ToolError(f"{name} is not supported by this runtime yet", "NotSupported")

    return ToolEntry(name, _DESCRIPTIONS[name], _GENERIC_SCHEMA, "builtin", unsupported)


def _decision_view(found: ResumeDecision) -> dict[str, Any]:
    return {
        "task": found.review,
        "verdict": found.verdict,
        "text": found.text,
        "decidedBy": found.decided_by,
        "decidedAt": found.decided_at,
    }
