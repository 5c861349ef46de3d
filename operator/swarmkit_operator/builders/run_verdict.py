"""A Run's verdict: the value the status derivation computes, and its small helpers.

A :class:`Verdict` is what the Job and pod say about a run (phase, the ``Succeeded``
condition's status/reason/message, times, the runner's result); ``final``/``pending`` are
the verdicts the operator decides itself; ``is_final``/``is_parked`` read a Run's
conditions. Split from :mod:`.run_status` so the pod readers (:mod:`.run_pod`) and the
derivation share it without a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from swarmkit_api.bundle import TRUNCATION_MARKER, RunResult
from swarmkit_api.conditions import (
    REASON_AWAITING_REVIEW,
    REASON_BUDGET_EXCEEDED,
    REASON_BUDGET_EXHAUSTED,
    REASON_CANCELLED,
    REASON_FAILED,
    REASON_HARNESS_ASKED_QUESTION,
    REASON_HARNESS_FAILED,
    REASON_HARNESS_TIMED_OUT,
    REASON_IMAGE_PULL_FAILED,
    REASON_JOB_LOST,
    REASON_LIMIT_EXCEEDED,
    REASON_PENDING,
    REASON_PINNED_REVISION_MISSING,
    REASON_POD_CREATION_FAILED,
    REASON_SUCCEEDED,
    REASON_TAMPERED_OBJECT,
    REASON_TIMED_OUT,
    REASON_TRUNCATED,
    REASON_VALIDATION_FAILED,
    SUCCEEDED,
)

from ..conditions import Status, get_condition

#: Longest condition message kept (the runner's message is already one line).
MAX_MESSAGE = 1024
#: Longest output kept in status (the runner caps it already; this is a backstop).
MAX_STATUS_OUTPUT_BYTES = 3072

Phase = Literal["Pending", "Running", "Parked", "Finished", "Lost"]

#: The runner's outcome (``RunResult.outcome``) → the Succeeded condition it gives.
OUTCOMES: dict[str, tuple[Status, str]] = {
    "Succeeded": ("True", REASON_SUCCEEDED),
    "Failed": ("False", REASON_FAILED),
    "TimedOut": ("False", REASON_TIMED_OUT),
    "LimitExceeded": ("False", REASON_LIMIT_EXCEEDED),
    "ValidationFailed": ("False", REASON_VALIDATION_FAILED),
    "Cancelled": ("False", REASON_CANCELLED),
    "Truncated": ("False", REASON_TRUNCATED),
    "BudgetExceeded": ("False", REASON_BUDGET_EXCEEDED),
    "HarnessFailed": ("False", REASON_HARNESS_FAILED),
    "HarnessTimedOut": ("False", REASON_HARNESS_TIMED_OUT),
    "HarnessAskedQuestion": ("False", REASON_HARNESS_ASKED_QUESTION),
    # the runner found a mounted skill file that is not the one the operator rendered
    "TamperedObject": ("False", REASON_TAMPERED_OBJECT),
    "AwaitingReview": ("Unknown", REASON_AWAITING_REVIEW),
}
#: Reasons after which nothing about the run changes any more.
FINAL_REASONS = frozenset(
    {
        REASON_SUCCEEDED,
        REASON_FAILED,
        REASON_TIMED_OUT,
        REASON_LIMIT_EXCEEDED,
        REASON_VALIDATION_FAILED,
        REASON_CANCELLED,
        REASON_TRUNCATED,
        REASON_BUDGET_EXCEEDED,
        REASON_HARNESS_FAILED,
        REASON_HARNESS_TIMED_OUT,
        REASON_HARNESS_ASKED_QUESTION,
        REASON_BUDGET_EXHAUSTED,
        REASON_POD_CREATION_FAILED,
        REASON_IMAGE_PULL_FAILED,
        REASON_JOB_LOST,
        REASON_TAMPERED_OBJECT,
        REASON_PINNED_REVISION_MISSING,
    }
)


@dataclass(frozen=True)
class Verdict:
    """What the Job and pod say about the run."""

    phase: Phase
    status: Status
    reason: str
    message: str = ""
    job_name: str | None = None
    pod_name: str | None = None
    start_time: str | None = None
    completion_time: str | None = None
    result: RunResult | None = None
    #: The Job must be stopped (a terminal verdict reached while its pod still exists).
    stop_job: bool = False
    #: Seconds after which the verdict may change without any watch event (grace timers).
    recheck_after: float | None = None
    #: The runner's exit code, when its container terminated.
    exit_code: int | None = None
    #: A moment the status need not show: the pod was just created and is starting as
    #: expected. The caller skips the write and looks again after ``recheck_after``; a pod
    #: that starts in time goes from "waiting for the Job" straight to Running (one status
    #: write and one watch event fewer per Run), one that does not is reported then.
    quiet: bool = False

    @property
    def final(self) -> bool:
        return self.phase == "Finished"


def rfc3339(ts: datetime) -> str:
    return ts.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cap_output(output: str, max_bytes: int = MAX_STATUS_OUTPUT_BYTES) -> tuple[str, bool]:
    """``output`` cut (with the marker) to at most ``max_bytes`` UTF-8 bytes."""
    raw = output.encode()
    if len(raw) <= max_bytes:
        return output, False
    room = max_bytes - len(TRUNCATION_MARKER.encode())
    return raw[: max(room, 0)].decode(errors="ignore") + TRUNCATION_MARKER, True


def is_final(conditions: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether the Run's Succeeded condition says the run is over (nothing will change).

    A run AwaitingReview is not over: it resumes after the decision."""
    cond = get_condition([dict(c) for c in conditions or ()], SUCCEEDED)
    if cond is None:
        return False
    return cond.get("status") in ("True", "False")


def is_parked(conditions: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether the Run waits for a review decision."""
    cond = get_condition([dict(c) for c in conditions or ()], SUCCEEDED)
    return cond is not None and cond.get("reason") == REASON_AWAITING_REVIEW


def pending(message: str) -> Verdict:
    """The verdict of a Run whose target is not Ready (nothing created yet)."""
    return Verdict(
        phase="Pending", status="Unknown", reason=REASON_PENDING, message=one_line(message)
    )


def final(reason: str, message: str, status: Status = "False") -> Verdict:
    """A terminal verdict decided by the operator itself (cancel, lost, invalid)."""
    return Verdict(phase="Finished", status=status, reason=reason, message=one_line(message))
