"""A Run's recording as its status keeps it (pure; :mod:`swarmkit_api.replay`).

Each stage of a Run (it ends, or parks for a person and resumes later) reports the tool
calls above the read tier it ran on one stdout line; :func:`recording_fields` appends a
stage's calls to ``status.recording`` once (``status.recordedStages`` holds the sha256 of
each stage merged), up to :data:`~swarmkit_api.replay.MAX_RECORDED_BYTES` and
:data:`~swarmkit_api.replay.MAX_RECORDED_CALLS`: past that, and for a stage whose line is
not in its pod's log, ``status.recordingIncomplete`` (a replay refuses the calls missing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from swarmkit_api.replay import (
    MAX_RECORDED_BYTES,
    MAX_RECORDED_CALLS,
    RecordedCall,
    recorded_size,
)


def recording_fields(
    status: Mapping[str, Any], sha256: str, calls: Sequence[RecordedCall] | None
) -> dict[str, Any]:
    """The status fields that add a stage's ``calls`` (None: its line was not found) whose
    line has ``sha256``; nothing when that stage is merged already."""
    stages = [str(s) for s in status.get("recordedStages") or ()]
    if sha256 in stages:
        return {}
    before = list(status.get("recording") or ())
    fields: dict[str, Any] = {"recordedStages": [*stages, sha256]}
    after = [*before, *(c.wire() for c in calls or ())]
    too_big = len(after) > MAX_RECORDED_CALLS or recorded_size(after) > MAX_RECORDED_BYTES
    if calls is None or too_big:
        fields["recordingIncomplete"] = True
        return fields
    fields["recording"] = after
    return fields


__all__ = ["recording_fields"]
