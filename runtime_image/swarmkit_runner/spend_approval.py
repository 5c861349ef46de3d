"""The ``approve_spend`` builtin: let a Run this run started start past a budget hold.

Gated by the permission of the same name (the seed's "clear a budget hold"). A Run this run
started is one its ``schedule`` or ``agent_message`` effects create (named by
:func:`swarmkit_api.effects.object_name`, so the runner knows the name before the Run
exists). ``approve_spend {run?}`` records one effect (kind ``approve_spend``, ``to`` the
Run) per Run approved: the named one, or every Run this run started when ``run`` is
omitted. Naming any other Run is refused here, with a ``spend.approve`` audit line saying
why; the operator checks the permission and the parentage again before it acts (it
trusts no runner): see ``swarmkit_operator.runs.spend_approval``.

The approval is standing: the started Run may be held after this run ended (a scheduled
Run starts later), and the operator takes its hold's Review up as approved whenever it
finds one.
"""

from __future__ import annotations

from typing import Any

from swarmkit_api.bundle import BundleAgent
from swarmkit_api.effects import object_name

from .catalog import as_text
from .context import RunContext
from .effects import Handler, Outbox
from .errors import InvalidArguments, ToolError

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "run": {
            "type": "string",
            "description": "The Run to let start past its budget hold (one this run started "
            "with schedule or agent_message); omit it for every Run this run started.",
        }
    },
}
DESCRIPTION = (
    "Clear a budget hold: let a Run this run started (schedule, agent_message) start even "
    "though a SpendQuota that holds it is exhausted."
)
_STARTING = ("schedule", "agent_message")


def started(ctx: RunContext) -> list[str]:
    """The Runs this run started so far (its ``schedule`` / ``agent_message`` effects)."""
    run = ctx.bundle.run
    return [
        object_name(run.name, run.uid, int(e["seq"]))
        for e in ctx.journal.outbox
        if e.get("kind") in _STARTING
    ]


def handler(ctx: RunContext, agent: BundleAgent) -> Handler:
    outbox = Outbox(ctx, agent, "approve_spend")

    async def approve(args: dict[str, Any]) -> str:
        outbox.check_available()
        named = args.get("run")
        if named is not None and not isinstance(named, str):
            raise InvalidArguments("run must be a string (a Run name)")
        mine = started(ctx)
        if named:
            targets = [named.strip()]
            if targets[0] not in mine:
                why = (
                    f"Run {targets[0]!r} was not started by this run: an agent may clear the "
                    "holds of the Runs its run started (with schedule or agent_message)"
                )
                ctx.audit.emit(
                    "spend.approve",
                    agent=agent.name,
                    run=targets[0],
                    outcome="refused",
                    reason=why,
                )
                raise ToolError(why, "NotAStartedRun")
        else:
            targets = mine
            if not targets:
                raise ToolError(
                    "this run started no Run (schedule, agent_message): nothing to approve",
                    "NotAStartedRun",
                )
        results = [outbox.record({"to": name}, {"run": name}) for name in targets]
        if len(results) == 1:
            return results[0]
        return as_text({"status": "recorded", "runs": targets})

    return approve


__all__ = ["DESCRIPTION", "SCHEMA", "handler", "started"]
