"""A Run's recording: what each of its tool calls above the read tier returned, so an
evaluation can replay it without writing anything (issue 39's ``replay`` mode).

A live run records every call that does not only read (a write, a call of ``unknown``
effects, a native tool, ``mailbox_send``...): the agent, the tool, its arguments and what
it returned (secret values scrubbed, like everything the runner prints). At the end of each
stage the runner prints the calls of that stage on one stdout line
(:data:`RECORDING_LINE_PREFIX`) and puts the line's sha256 in its result, like the outbox;
the operator checks the line against it and appends the calls to the Run's
``status.recording`` (at most :data:`MAX_RECORDED_BYTES`: a longer recording is not kept,
and ``status.recordingIncomplete`` says so).

An EvalRun's case built from a recorded Run carries that recording into its case Run
(``spec.replay``, with ``spec.readOnly``); the runner of the case Run answers every call
above the read tier from it, matched by tool and arguments in order, and never runs
one; a call with no recorded answer is refused (``ReplayNotRecorded``).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from . import stage_lines
from .base import ApiModel
from .common import BoundedJson

#: The stdout line prefix of a stage's recording (one line; the result carries its sha256).
RECORDING_LINE_PREFIX = "swarmkit.recording "
#: The most a Run's ``status.recording`` holds (its JSON, bytes): a Run's status shares
#: etcd's object size limit with everything else it says, and the operator's Run index
#: holds it in memory.
MAX_RECORDED_BYTES = 32 * 1024
#: The most calls a recording holds (a replayed Run's spec carries one).
MAX_RECORDED_CALLS = 256
#: The longest answer recorded (the runner hands a model at most 100,000 characters of a
#: tool result, with a truncation marker).
MAX_CONTENT_CHARS = 100_100
#: The refusal code of a replayed call with no recorded answer.
NOT_RECORDED = "ReplayNotRecorded"


class RecordedCall(ApiModel):
    """One tool call above the read tier and what it returned."""

    agent: str = Field(
        max_length=253, description="The agent that made the call (shown; not matched)."
    )
    tool: str = Field(
        max_length=253, description="The tool's canonical name (e.g. mailbox_send, pg.insert)."
    )
    arguments: BoundedJson = Field(
        default_factory=dict, description="Its arguments (secret values scrubbed)."
    )
    content: str = Field(
        default="",
        max_length=MAX_CONTENT_CHARS,
        description="What it returned to the model (secret values scrubbed).",
    )
    error: bool = Field(default=False, description="It returned a tool error.")

    def key(self) -> str:
        return call_key(self.tool, self.arguments)


def call_key(tool: str, arguments: dict[str, Any]) -> str:
    """What a replayed call is matched by: tool and arguments (canonical JSON). Not the
    agent: the candidate evaluated may be another Agent than the one recorded."""
    return json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"))


def recording_line(calls: list[RecordedCall]) -> tuple[str, str]:
    """The stdout line carrying ``calls`` and the sha256 of its encoded text."""
    return stage_lines.line(RECORDING_LINE_PREFIX, [c.wire() for c in calls])


def recording_from_log(log: str, sha256: str) -> list[RecordedCall] | None:
    """The calls on the recording line of ``log`` whose sha256 is ``sha256`` (None: absent)."""
    found = stage_lines.from_log(log, RECORDING_LINE_PREFIX, sha256)
    return None if found is None else [RecordedCall.model_validate(c) for c in found]


def recorded_size(calls: list[dict[str, Any]]) -> int:
    """The bytes ``calls`` (wire form) take in a status."""
    return len(json.dumps(calls, separators=(",", ":")).encode())


__all__ = [
    "MAX_RECORDED_BYTES",
    "MAX_RECORDED_CALLS",
    "NOT_RECORDED",
    "RECORDING_LINE_PREFIX",
    "RecordedCall",
    "call_key",
    "recorded_size",
    "recording_from_log",
    "recording_line",
]
