"""Replay mode, and the recording it replays (issue 39): an evaluation never writes what a
production Run would.

Every live run records its tool calls above the read tier (:func:`record`: each call that
does not only read, :func:`.readonly.reads`), with what each returned; :func:`print_line`
prints them on one stdout line at the end of the stage (secret values scrubbed) and the
operator keeps them in the Run's ``status.recording`` (:mod:`swarmkit_api.replay`). A call
whose skill's audit policy keeps its inputs or outputs out of the logs is not recorded.

A Run whose bundle carries a recording (``run.replay``: an EvalRun's case built from a
recorded Run, ``spec.readOnly`` too) runs in replay mode (:func:`run_as`): every call above
the read tier gets the recorded answer of the same tool and arguments, in the order
they were recorded (:func:`answer`), and its handler never runs; a call the recording has no
answer for (another tool, other arguments, one call more) is refused with
``ReplayNotRecorded``, never executed. Calls that only read run live (the candidate reads
what production reads), and so does a delegation to another node of the topology (its own
calls go through its own catalog: replayed one by one). A read-only Run without a recording
refuses every call above the read tier (:mod:`.readonly`).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Awaitable, Iterable
from contextvars import ContextVar
from typing import Any, TypeVar

from swarmkit_api.bundle import RunInfo
from swarmkit_api.replay import NOT_RECORDED, RecordedCall, call_key, recording_line
from swarmkit_api.skill import AuditPolicy

from . import readonly
from .audit import AuditLog
from .errors import ToolRefused
from .permissions import Gate
from .secrets import SecretStore

T = TypeVar("T")

#: Kinds that are neither recorded nor replayed: a delegation runs the child node, whose
#: own calls are.
PASS_THROUGH = frozenset({"delegate"})


class Recorder:
    """The calls above the read tier a live stage ran, in order."""

    def __init__(self) -> None:
        self.calls: list[RecordedCall] = []


class Replay:
    """A recording being replayed: each (tool, arguments) answered in order."""

    def __init__(self, calls: Iterable[RecordedCall]) -> None:
        self._left: dict[str, deque[RecordedCall]] = {}
        for call in calls:
            self._left.setdefault(call.key(), deque()).append(call)

    def take(self, tool: str, arguments: dict[str, Any]) -> RecordedCall | None:
        left = self._left.get(call_key(tool, arguments))
        return left.popleft() if left else None


#: The current run's mode: recording (a live run), replaying, or neither (read-only).
_MODE: ContextVar[Recorder | Replay | None] = ContextVar("swarmkit_replay", default=None)


async def run_as(run: RunInfo, recorder: Recorder, work: Awaitable[T]) -> T:
    """Await ``work`` (the root agent's) in the Run's mode: replaying its recording
    (``run.replay``), read-only (``spec.readOnly`` without one: every call above the read
    tier refused), else live, its calls above the read tier recorded into ``recorder``."""
    token = _MODE.set(Replay(run.replay) if run.replay is not None else recorder)
    try:
        if run.replay is None and run.read_only:
            with readonly.reviewer("a read-only Run (spec.readOnly)"):
                return await work
        return await work
    finally:
        _MODE.reset(token)


def _governed(name: str, kind: str, gate: Gate | None) -> bool:
    """Whether a call of tool ``name`` is above the read tier (recorded, replayed)."""
    return kind not in PASS_THROUGH and not readonly.reads(name, gate)


def answer(
    agent: str, name: str, kind: str, gate: Gate | None, arguments: dict[str, Any]
) -> RecordedCall | None:
    """In replay mode, the recorded answer of a call above the read tier (its handler must
    not run); ToolRefused when there is none. None: the call runs (not replaying, or it
    only reads)."""
    mode = _MODE.get()
    if not isinstance(mode, Replay) or not _governed(name, kind, gate):
        return None
    found = mode.take(name, arguments)
    if found is None:
        effects = f"effects {gate.effects}" if gate is not None else kind
        raise ToolRefused(
            f"agent {agent} replays a recorded Run: {name} ({effects}) has no recorded answer "
            "for these arguments, and a replayed Run runs no call above the read tier",
            NOT_RECORDED,
        )
    return found


def record(
    agent: str,
    name: str,
    kind: str,
    gate: Gate | None,
    policy: AuditPolicy | None,
    arguments: dict[str, Any],
    content: str,
    error: bool,
) -> None:
    """Record a call a live run ran (above the read tier only), unless its skill's audit
    ``policy`` keeps its inputs or outputs (or part of them) out of the logs: the recording
    is printed and kept like them, so such a call is not recorded (a replay refuses it)."""
    mode = _MODE.get()
    private = policy is not None and not (
        policy.log_inputs and policy.log_outputs and not policy.redact
    )
    if isinstance(mode, Recorder) and _governed(name, kind, gate) and not private:
        mode.calls.append(
            RecordedCall(agent=agent, tool=name, arguments=arguments, content=content, error=error)
        )


def print_line(audit: AuditLog, secrets: SecretStore, recorder: Recorder) -> str | None:
    """Print the stage's recording on one stdout line (secret values scrubbed before it is
    encoded): its sha256, None when nothing above the read tier ran."""
    if not recorder.calls:
        return None
    scrubbed = json.loads(secrets.scrub(json.dumps([c.wire() for c in recorder.calls])))
    line, sha = recording_line([RecordedCall.model_validate(c) for c in scrubbed])
    audit.write_raw(line)
    audit.emit("run.recording", sha256=sha, calls=len(recorder.calls))
    return sha


__all__ = ["Recorder", "Replay", "answer", "print_line", "record", "run_as"]
