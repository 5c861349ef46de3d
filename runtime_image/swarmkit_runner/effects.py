"""The effect builtins: ``schedule``, ``agent_message`` and ``mailbox_send``.

Each validates its arguments against the bundle (the Workspace's governance and mailboxes,
the agents and topologies this run may reach) and records an effect in the run's outbox
(:mod:`swarmkit_api.effects`, kept in the journal so a resumed run neither repeats nor
renumbers one). The runner never talks to the Kubernetes API: the operator materializes
each effect once when the run ends or parks. A tool result therefore says what *will*
exist (``"recorded"``) and names it, e.g. the scheduled Run.

Rules (every failure is a tool error naming what is wrong):

* at most ``governance.maxEffectsPerRun`` effects per run, all three tools together;
* a message (or scheduled input) of at most ``governance.maxMessageBytes`` UTF-8 bytes;
* ``schedule {in | at, input, topology?}``: exactly one of ``in`` (a duration: ``90s``,
  ``5m``, ``1h30m``, ``2d``, or a number of seconds) and ``at`` (RFC 3339 with an offset);
  the time lies between ``scheduleMinDelaySeconds`` and ``scheduleMaxDelaySeconds`` after
  the call; ``topology`` defaults to the run's own and must be one this run may run (the
  bundle's topologies: its own and those its agent skills reach);
* ``agent_message {to, message}``: ``to`` must be an agent this run may execute (the agents
  of its topologies, the same default-deny reach as agent skills), never the sender itself;
* ``mailbox_send {to, message}``: ``to`` must be a mailbox the Workspace declares.

Only a Run has an outbox: in a served topology or an MCP gateway session the three tools
answer ``NotAvailable``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from swarmkit_api.bundle import BundleAgent
from swarmkit_api.effects import Effect, EffectKind, object_name

from .catalog import as_text
from .context import RunContext
from .errors import InvalidArguments, ToolError

SCHEDULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "in": {
            "type": "string",
            "description": "When, from now: a duration such as 90s, 5m, 1h30m or 2d.",
        },
        "at": {"type": "string", "description": "Or when: an RFC 3339 time with an offset."},
        "input": {"type": "string", "description": "The input of the scheduled run."},
        "topology": {
            "type": "string",
            "description": "The topology to run (default: this run's topology).",
        },
    },
    "required": ["input"],
}
MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "description": "The agent to message."},
        "message": {"type": "string"},
    },
    "required": ["to", "message"],
}
MAILBOX_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "description": "The mailbox (declared by the Workspace)."},
        "message": {"type": "string"},
    },
    "required": ["to", "message"],
}
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")

Handler = Callable[[dict[str, Any]], Awaitable[str]]


def parse_duration(text: str) -> timedelta:
    """``90s``, ``5m``, ``1h30m``, ``2d`` or a bare number of seconds."""
    text = text.strip()
    if text.isdigit():
        return timedelta(seconds=int(text))
    match = _DURATION.match(text)
    if not text or match is None or not any(match.groups()):
        raise InvalidArguments(
            f"in: {text!r} is not a duration (use e.g. 90s, 5m, 1h30m, 2d or a number of seconds)"
        )
    d, h, m, s = (int(g or 0) for g in match.groups())
    return timedelta(days=d, hours=h, minutes=m, seconds=s)


def parse_time(text: str) -> datetime:
    """An RFC 3339 time with an offset (``Z`` or ``+02:00``)."""
    try:
        when = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        raise InvalidArguments(
            f"at: {text!r} is not an RFC 3339 time (e.g. 2026-12-05T09:00:00Z)"
        ) from None
    if when.tzinfo is None:
        raise InvalidArguments(f"at: {text!r} has no UTC offset (add Z or +hh:mm)")
    return when.astimezone(UTC)


def _text(args: dict[str, Any], field: str, required: bool = True) -> str:
    value = args.get(field)
    if value is None:
        if required:
            raise InvalidArguments(f"{field} is required")
        return ""
    if not isinstance(value, str):
        raise InvalidArguments(f"{field} must be a string")
    return value


class Outbox:
    """Records effects of one agent in the run's outbox, within the run's limits."""

    def __init__(self, ctx: RunContext, agent: BundleAgent, tool: EffectKind) -> None:
        self.ctx, self.agent, self.tool = ctx, agent, tool

    def check_available(self) -> None:
        if not self.ctx.can_park or self.ctx.shared.ask is not None:
            raise ToolError(
                f"{self.tool} needs a Run (the operator materializes its effect when the run "
                "ends); this is a served topology or a gateway session",
                "NotAvailable",
            )

    def check_message(self, field: str, text: str) -> str:
        limit = self.ctx.bundle.governance.max_message_bytes
        size = len(text.encode())
        if size > limit:
            raise ToolError(
                f"{field} is {size} bytes, over the Workspace's maxMessageBytes ({limit})",
                "MessageTooLarge",
            )
        return self.ctx.secrets.scrub(text)

    def record(self, effect: dict[str, Any], result: dict[str, Any]) -> str:
        governance = self.ctx.bundle.governance
        journal = self.ctx.journal
        if len(journal.outbox) >= governance.max_effects_per_run:
            self.ctx.audit.emit(
                "limit.exceeded",
                agent=self.agent.name,
                tool=self.tool,
                limit="maxEffectsPerRun",
                value=governance.max_effects_per_run,
                outcome="refused",
            )
            raise ToolError(
                f"this run already recorded {len(journal.outbox)} effects, the Workspace's "
                f"maxEffectsPerRun ({governance.max_effects_per_run})",
                "LimitExceeded",
            )
        seq = len(journal.outbox)
        wire = Effect.model_validate(
            {**effect, "seq": seq, "kind": self.tool, "agent": self.agent.name}
        ).wire()
        journal.record_effect(wire)
        self.ctx.audit.emit(
            "effect.recorded",
            agent=self.agent.name,
            tool=self.tool,
            seq=seq,
            to=wire.get("to") or None,
            start_after=wire.get("startAfter"),
            bytes=len(str(wire.get("message") or "").encode()),
            outcome="recorded",
        )
        return as_text({"status": "recorded", "seq": seq, **result})

    def object_name(self) -> str:
        run = self.ctx.bundle.run
        return object_name(run.name, run.uid, len(self.ctx.journal.outbox))


def schedule_handler(ctx: RunContext, agent: BundleAgent) -> Handler:
    outbox = Outbox(ctx, agent, "schedule")

    async def schedule(args: dict[str, Any]) -> str:
        outbox.check_available()
        given = [k for k in ("in", "at") if args.get(k) not in (None, "")]
        if len(given) != 1:
            raise InvalidArguments("give exactly one of in (a duration) or at (an RFC 3339 time)")
        now = datetime.now(UTC)
        if given == ["in"]:
            when = now + parse_duration(_text(args, "in"))
        else:
            when = parse_time(_text(args, "at"))
        governance = ctx.bundle.governance
        earliest = now + timedelta(seconds=governance.schedule_min_delay_seconds)
        latest = now + timedelta(seconds=governance.schedule_max_delay_seconds)
        stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        if when < earliest:
            why = "is in the past" if when <= now else "is too soon"
            raise ToolError(
                f"{stamp} {why}: the earliest allowed is "
                f"{governance.schedule_min_delay_seconds}s from now (scheduleMinDelaySeconds)",
                "ScheduleOutOfWindow",
            )
        if when > latest:
            raise ToolError(
                f"{stamp} is beyond the window: the latest allowed is "
                f"{governance.schedule_max_delay_seconds}s from now (scheduleMaxDelaySeconds)",
                "ScheduleOutOfWindow",
            )
        text = outbox.check_message("input", _text(args, "input"))
        topology = _text(args, "topology", required=False) or ctx.topology or ""
        if not topology:
            raise InvalidArguments("topology is required: this run is not a topology run")
        if topology not in ctx.bundle.topologies:
            raise ToolError(
                f"topology {topology!r} is not one this run may run (its own and those its "
                "agent skills reach)",
                "TopologyNotReachable",
            )
        name = outbox.object_name()
        return outbox.record(
            {"to": topology, "message": text, "startAfter": stamp},
            {"run": name, "topology": topology, "startAfter": stamp},
        )

    return schedule


def agent_message_handler(ctx: RunContext, agent: BundleAgent) -> Handler:
    outbox = Outbox(ctx, agent, "agent_message")

    async def send(args: dict[str, Any]) -> str:
        outbox.check_available()
        to = _text(args, "to").strip()
        if not to:
            raise InvalidArguments("to is required (an agent name)")
        if to == agent.name:
            # Its own Run would start with the message and could message itself again.
            raise ToolError(
                f"agent {to!r} cannot message itself (that would loop)", "AgentNotReachable"
            )
        if to not in ctx.bundle.agents:
            raise ToolError(
                f"agent {to!r} is not reachable from agent {agent.name!r}: only agents of "
                "this run's topologies may be messaged",
                "AgentNotReachable",
            )
        text = outbox.check_message("message", _text(args, "message"))
        name = outbox.object_name()
        return outbox.record({"to": to, "message": text}, {"run": name, "agent": to})

    return send


def mailbox_send_handler(ctx: RunContext, agent: BundleAgent) -> Handler:
    outbox = Outbox(ctx, agent, "mailbox_send")

    async def send(args: dict[str, Any]) -> str:
        outbox.check_available()
        to = _text(args, "to").strip()
        declared = [m.name for m in ctx.bundle.workspace.mailboxes]
        if to not in declared:
            known = ", ".join(declared) if declared else "none"
            raise ToolError(
                f"mailbox {to!r} is not declared by Workspace {ctx.bundle.workspace_name} "
                f"(declared: {known})",
                "UnknownMailbox",
            )
        text = outbox.check_message("message", _text(args, "message"))
        name = outbox.object_name()
        effect = {"to": to, "message": text, "workspace": ctx.bundle.workspace_name}
        return outbox.record(effect, {"item": name, "mailbox": to})

    return send


HANDLERS: dict[str, tuple[Callable[[RunContext, BundleAgent], Handler], dict[str, Any]]] = {
    "schedule": (schedule_handler, SCHEDULE_SCHEMA),
    "agent_message": (agent_message_handler, MESSAGE_SCHEMA),
    "mailbox_send": (mailbox_send_handler, MAILBOX_SCHEMA),
}

__all__ = ["HANDLERS", "Outbox", "parse_duration", "parse_time"]
