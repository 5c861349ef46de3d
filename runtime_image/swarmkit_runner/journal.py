"""The run's journal: what every model call and tool call returned, so a parked run resumes.

A run that parks for a person (outcome AwaitingReview) ends its pod; the run goes on later
in a new pod. That pod replays the run from the start, but every *effect* already recorded
(a model call, a tool call, a skill call) returns its recorded result instead of running
again, until it reaches the call that parked: there the decision applies and the run goes
on live. Nothing is done twice, the model sees the same conversation, and counters (steps,
tokens, tool calls) come out as if the run had never stopped.

Effects are keyed by where they happen, not by a global counter: each effect gets the key
``<parent key>.<n>`` where n counts the effects its parent started so far. Concurrent
branches (a parallel-consensus composed skill) start in a fixed order, so their keys do not
depend on which finishes first. The key of the effect in progress lives in a context
variable (every asyncio task inherits it).

The checkpoint (:class:`swarmkit_api.review.Checkpoint`) is this journal, the key where the
run parked and the decisions applied so far; the runner prints it on one stdout line and
puts its sha256 in the result; the operator stores it in an immutable ConfigMap.

The run's outbox (the effects of ``schedule``, ``agent_message`` and ``mailbox_send``,
:mod:`swarmkit_api.effects`) is part of the journal too, under the key ``outbox``: a resumed
run numbers its new effects after the ones recorded before it parked, and a replayed tool
call records nothing again (the operator already materialized it when the run parked).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from swarmkit_api.bundle import ReviewItem
from swarmkit_api.review import CHECKPOINT_LINE_PREFIX, Checkpoint, ResumeDecision

from .errors import InvalidArguments, ToolError, ToolRefused

T = TypeVar("T")


@dataclass
class _Frame:
    key: str
    started: int = 0


#: The journal entry holding the run's outbox (never an effect key: those start with "e.").
OUTBOX_KEY = "outbox"
_current: ContextVar[_Frame | None] = ContextVar("swarmkit_journal_frame", default=None)
_ERRORS: dict[str, type[ToolError]] = {
    "ToolRefused": ToolRefused,
    "ToolError": ToolError,
}


def _raise_recorded(entry: dict[str, Any]) -> None:
    kind = entry.get("errorType", "ToolError")
    message, code = str(entry.get("error", "")), str(entry.get("code", "ToolError"))
    if kind == "InvalidArguments":
        raise InvalidArguments(message)
    raise _ERRORS.get(kind, ToolError)(message, code)


class Journal:
    """Recorded effects of one run (empty for a fresh run; see the module docstring)."""

    def __init__(
        self,
        checkpoint: Checkpoint | None = None,
        decision: ResumeDecision | None = None,
    ) -> None:
        self.entries: dict[str, Any] = dict(checkpoint.entries) if checkpoint else {}
        self.resume = checkpoint.resume + 1 if checkpoint is not None else 0
        #: Every decision taken so far (the new one last), keyed by (journal key, kind).
        self.decisions: list[ResumeDecision] = [
            ResumeDecision.model_validate(d) for d in (checkpoint.decisions if checkpoint else ())
        ]
        if decision is not None:
            self.decisions.append(decision)
        self.new_decision = decision
        #: Whether the new decision was applied (audited once).
        self.applied = False
        self.replayed = 0
        self._root = _Frame("e")
        #: Every effect of the run so far (wire dicts, by seq); this stage's start from
        #: ``outbox_start``.
        self.outbox: list[dict[str, Any]] = list(self.entries.get(OUTBOX_KEY) or ())
        self.outbox_start = len(self.outbox)

    # -- the outbox ------------------------------------------------------------------------
    def record_effect(self, effect: dict[str, Any]) -> None:
        """Add ``effect`` (its ``seq`` is ``len(self.outbox)``) to the run's outbox."""
        self.outbox.append(effect)
        self.entries[OUTBOX_KEY] = list(self.outbox)

    @property
    def new_effects(self) -> list[dict[str, Any]]:
        """The effects recorded live in this stage (the ones the operator has not seen)."""
        return self.outbox[self.outbox_start :]

    # -- keys ------------------------------------------------------------------------------
    def bind(self) -> None:
        """Make this journal's root the current frame (call inside the run's task)."""
        _current.set(self._root)

    def current_key(self) -> str:
        frame = _current.get()
        return frame.key if frame is not None else self._root.key

    def _next_key(self) -> str:
        frame = _current.get() or self._root
        key = f"{frame.key}.{frame.started}"
        frame.started += 1
        return key

    @contextlib.contextmanager
    def keyed(self, key: str) -> Iterator[None]:
        """Run the block's effects under ``key`` instead of the next counted key: a harness
        node's tool calls are keyed by their content (:mod:`.harness.gateway`), because a
        resumed harness re-runs its conversation and may not call in the same order."""
        token = _current.set(_Frame(key))
        try:
            yield
        finally:
            _current.reset(token)

    # -- effects ---------------------------------------------------------------------------
    async def effect(
        self,
        kind: str,
        run: Callable[[], Awaitable[T]],
        encode: Callable[[T], Any],
        decode: Callable[[Any], T],
        on_replay: Callable[[T], None] | None = None,
    ) -> T:
        """Run ``run`` as one effect: its recorded result when there is one, else live
        (and recorded). A :class:`ToolError` is recorded and raised again on replay."""
        key = self._next_key()
        entry = self.entries.get(key)
        if entry is not None and entry.get("kind") == kind:
            self.replayed += 1
            if "error" in entry:
                _raise_recorded(entry)
            value = decode(entry["value"])
            if on_replay is not None:
                on_replay(value)
            return value
        token = _current.set(_Frame(key))
        try:
            value = await run()
        except ToolError as exc:
            self.entries[key] = {
                "kind": kind,
                "error": exc.message,
                "code": exc.code,
                "errorType": type(exc).__name__,
            }
            raise
        finally:
            _current.reset(token)
        self.entries[key] = {"kind": kind, "value": encode(value)}
        return value

    # -- decisions -------------------------------------------------------------------------
    def decision_here(self, kind: str) -> ResumeDecision | None:
        """The decision for a review of ``kind`` asked at the current key, if any."""
        key = self.current_key()
        for decision in reversed(self.decisions):
            if decision.key == key and decision.kind == kind:
                return decision
        return None

    def checkpoint(self, run_uid: str, item: ReviewItem) -> Checkpoint:
        return Checkpoint(
            run_uid=run_uid,
            resume=self.resume,
            entries=dict(self.entries),
            parked_key=item.key or "",
            item=item.wire(),
            decisions=[d.wire() for d in self.decisions],
        )


def checkpoint_line(checkpoint: Checkpoint) -> tuple[str, str]:
    """The stdout line carrying ``checkpoint`` and the sha256 of its encoded text."""
    text = checkpoint.encode()
    return CHECKPOINT_LINE_PREFIX + text, hashlib.sha256(text.encode()).hexdigest()


__all__ = ["Journal", "checkpoint_line"]
