"""The per-agent, default-deny tool catalog.

An agent's catalog holds exactly what it was granted. The model sees each tool under a
wire-safe name (``[A-Za-z0-9_-]{1,64}``, so ``pg.list_tables`` is offered as
``pg_list_tables``); calls are resolved by that name or by the canonical one. A call to
anything else is refused with a ``ToolNotGranted`` tool error and audited as
``tool.refused``; so is a granted call a policy refuses (a ``ToolRefused`` raised by its
handler: tier, effects, scopes, provenance; see :mod:`.permissions`). Governed calls carry
their tier and effects in the ``tool.call`` line.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from swarmkit_api.replay import RecordedCall
from swarmkit_api.skill import AuditPolicy

from . import readonly, replay, traced
from .audit import AuditLog
from .errors import RunEnded, ToolError, ToolRefused
from .permissions import Gate
from .providers import ToolCall, ToolDef, ToolResultItem

ToolKind = Literal[
    "skill", "mcp", "http", "builtin", "native", "flow_data", "delegate", "synthetic", "command"
]
Handler = Callable[[dict[str, Any]], Awaitable[str]]

#: Longest tool result handed back to the model.
MAX_TOOL_RESULT_CHARS = 100_000
_WIRE_INVALID = re.compile(r"[^A-Za-z0-9_-]")
EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def wire_name(name: str) -> str:
    """The provider-safe form of a tool name (``pg.list_tables`` → ``pg_list_tables``)."""
    return _WIRE_INVALID.sub("_", name)[:64] or "tool"


@dataclass
class ToolEntry:
    """One tool an agent may call."""

    name: str
    description: str
    input_schema: dict[str, Any]
    kind: ToolKind
    handler: Handler
    skill: str | None = None
    audit: AuditPolicy | None = None
    gate: Gate | None = None
    wire: str = field(default="", init=False)


@dataclass
class CallStats:
    """Counts shared by every catalog of a run."""

    tool_calls: int = 0
    refused: int = 0


class ToolCatalog:
    """The tools of one agent, with the default-deny call path."""

    def __init__(self, agent: str, audit: AuditLog, stats: CallStats | None = None) -> None:
        self.agent = agent
        self.audit = audit
        self.stats = stats or CallStats()
        self._by_name: dict[str, ToolEntry] = {}
        self._by_wire: dict[str, ToolEntry] = {}

    def __contains__(self, name: str) -> bool:
        return self.resolve(name) is not None

    def __len__(self) -> int:
        return len(self._by_name)

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def add(self, entry: ToolEntry) -> bool:
        """Add ``entry``; a name already taken keeps the first and is a startup warning."""
        if entry.name in self._by_name:
            self.audit.emit(
                "startup.warning",
                agent=self.agent,
                tool=entry.name,
                message=f"tool name {entry.name!r} is offered twice; keeping the first",
            )
            return False
        wire = wire_name(entry.name)
        n = 2
        while wire in self._by_wire:
            suffix = f"_{n}"
            wire = wire_name(entry.name)[: 64 - len(suffix)] + suffix
            n += 1
        entry.wire = wire
        self._by_name[entry.name] = entry
        self._by_wire[wire] = entry
        return True

    def entries(self) -> list[ToolEntry]:
        """Every tool, in the order it was added."""
        return list(self._by_name.values())

    def resolve(self, name: str) -> ToolEntry | None:
        """The entry called ``name`` (wire or canonical), or None."""
        return self._by_wire.get(name) or self._by_name.get(name)

    def defs(self) -> list[ToolDef]:
        """The tools as offered to the model."""
        return [ToolDef(e.wire, e.description, e.input_schema) for e in self._by_name.values()]

    async def call(self, call: ToolCall) -> ToolResultItem:
        """:meth:`_call` in an ``execute_tool`` span (tracing hook, :mod:`.traced`)."""
        refused = self.stats.refused
        with traced.tool_span(self.resolve(call.name), call) as span:
            result = await self._call(call)
            traced.tool_result(span, result, self.stats.refused > refused)
            return result

    async def _call(self, call: ToolCall) -> ToolResultItem:
        """Run one tool call: refused unless granted; every call is audited."""
        self.stats.tool_calls += 1
        entry = self.resolve(call.name)
        if entry is None:
            self.stats.refused += 1
            message = f"tool {call.name!r} is not available to agent {self.agent!r}"
            self.audit.emit(
                "tool.refused",
                agent=self.agent,
                tool=call.name,
                outcome="refused",
                reason="not granted",
            )
            return ToolResultItem(call.id, call.name, f"ToolNotGranted: {message}", True)
        start = time.monotonic()
        outcome = "ok"
        output: str | None = None
        error: str | None = None
        try:
            readonly.check(self.agent, entry.name, entry.kind, entry.gate)  # a reviewer reads only
            recorded = replay.answer(self.agent, entry.name, entry.kind, entry.gate, call.arguments)
            if recorded is not None:  # replay mode: the recording answers, nothing runs
                return self._replayed(call, entry, recorded)
            output = await entry.handler(call.arguments)
        except (RunEnded, asyncio.CancelledError):
            raise
        except ToolRefused as exc:
            self.stats.refused += 1
            self.audit.emit(
                "tool.refused",
                **self._about(entry),
                outcome="refused",
                reason=exc.code,
                message=exc.message,
            )
            return ToolResultItem(call.id, call.name, str(exc), True)
        except ToolError as exc:
            outcome, error = "error", str(exc)
        except Exception as exc:  # a tool bug must not end the run
            outcome, error = "error", f"ToolFailed: {type(exc).__name__}: {exc}"
        duration_ms = round((time.monotonic() - start) * 1000, 2)
        text = output if error is None else error
        assert text is not None
        if len(text) > MAX_TOOL_RESULT_CHARS:
            text = text[:MAX_TOOL_RESULT_CHARS] + "…[truncated]"
        replay.record(
            self.agent,
            entry.name,
            entry.kind,
            entry.gate,
            entry.audit,
            call.arguments,
            text,
            error is not None,
        )
        fields = self.audit.call_fields(entry.audit, call.arguments, output)
        self.audit.emit(
            "tool.call",
            **self._about(entry),
            duration_ms=duration_ms,
            outcome=outcome,
            error=error,
            **fields,
        )
        return ToolResultItem(call.id, call.name, text, error is not None)

    def _about(self, entry: ToolEntry) -> dict[str, Any]:
        """What every audit line of a granted call says of it (who, which tool, its gate)."""
        return {
            "agent": self.agent,
            "skill": entry.skill,
            "tool": entry.name,
            "kind": entry.kind,
            "tier": entry.gate.tier if entry.gate is not None else None,
            "effects": entry.gate.effects if entry.gate is not None else None,
        }

    def _replayed(self, call: ToolCall, entry: ToolEntry, recorded: RecordedCall) -> ToolResultItem:
        """A call answered from the recording (:mod:`.replay`), audited as such."""
        self.audit.emit(
            "tool.replayed",
            **self._about(entry),
            outcome="replayed",
            error=recorded.content if recorded.error else None,
        )
        return ToolResultItem(call.id, call.name, recorded.content, recorded.error)


def as_text(value: Any) -> str:
    """A tool result as text (JSON for structured values)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)
