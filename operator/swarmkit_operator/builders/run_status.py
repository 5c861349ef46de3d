"""A Run's status, derived from its Job and pod (pure: observed objects → a verdict).

Nothing here remembers anything: the verdict is computed from what the API shows (the Job's
conditions, the pod's phase, container states and termination message, the Job's warning
Events), so an operator restart recomputes exactly the same outcome and never creates a
second Job. The ``Succeeded`` condition follows Tekton:

=================  ===========  ===================================================
status             reason       when
=================  ===========  ===================================================
Unknown            Pending      target not Ready, or the pod is not running yet
Unknown            Running      the runner's pod is running
Unknown            JobLost      the Job vanished and was recreated (n of max)
Unknown            AwaitingReview  parked for a human decision (a Review); resumes
                                after it in a new Job (not final)
True               Succeeded    the runner reported success
False              Failed       the runner failed (its one-line message)
False              TimedOut     the run's timeout / the Job's deadline passed
False              LimitExceeded  a governance limit ended the run
False              BudgetExceeded  the run's maxCost/maxTokens would be crossed by its
                                next model call (the audit names the call)
Unknown            BudgetExhausted  a SpendQuota cannot reserve its cap: waits (queue)
Unknown            BudgetHold   ... onExhausted hold: a Review of kind spend decides
False              BudgetExhausted  ... and the quota's onExhausted is fail
False              Cancelled    ``spec.cancelled`` (the Job is stopped)
False              ValidationFailed  bundle or configuration invalid (exit code 2)
False              PodCreationFailed  the pod could not be created or configured
False              ImagePullFailed    the runtime image cannot be pulled
False              JobLost      the Job vanished more often than allowed
=================  ===========  ===================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ValidationError

from swarmkit_api.bundle import TRUNCATION_MARKER, RunResult
from swarmkit_api.conditions import (
    REASON_AWAITING_REVIEW,
    REASON_BUDGET_EXCEEDED,
    REASON_BUDGET_EXHAUSTED,
    REASON_CANCELLED,
    REASON_FAILED,
    REASON_IMAGE_PULL_FAILED,
    REASON_JOB_LOST,
    REASON_LIMIT_EXCEEDED,
    REASON_PENDING,
    REASON_POD_CREATION_FAILED,
    REASON_RUNNING,
    REASON_SUCCEEDED,
    REASON_TIMED_OUT,
    REASON_TRUNCATED,
    REASON_VALIDATION_FAILED,
    SUCCEEDED,
)

from ..conditions import Status, get_condition, set_condition
from .job import CONTAINER_NAME, EXIT_VALIDATION_FAILED

#: Longest condition message kept (the runner's message is already one line).
MAX_MESSAGE = 1024
#: Longest output kept in status (the runner caps it already; this is a backstop).
MAX_STATUS_OUTPUT_BYTES = 3072
#: How long after its creation a pod that is starting as expected is not worth a status
#: write of its own (see ``Verdict.quiet``).
POD_STARTING_QUIET_SECONDS = 2.0
#: How long a pod may wait on an image pull / its configuration before the run fails.
DEFAULT_POD_START_GRACE_SECONDS = 60
#: How long the Job controller's pod creation may keep failing before the run fails. It
#: retries with backoff, and some refusals pass: right after a kube-apiserver restart the
#: RBAC authorizer answers "forbidden ... clusterrole not found" until its caches fill.
FAILED_CREATE_GRACE_SECONDS = 15

_PULL_FATAL = {"InvalidImageName", "ErrImageNeverPull"}
_PULL_RETRY = {"ErrImagePull", "ImagePullBackOff", "RegistryUnavailable"}
_CONFIG_ERRORS = {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}

Phase = Literal["Pending", "Running", "Parked", "Finished", "Lost"]

#: The runner's outcome (``RunResult.outcome``) → the Succeeded condition it gives.
_OUTCOMES: dict[str, tuple[Status, str]] = {
    "Succeeded": ("True", REASON_SUCCEEDED),
    "Failed": ("False", REASON_FAILED),
    "TimedOut": ("False", REASON_TIMED_OUT),
    "LimitExceeded": ("False", REASON_LIMIT_EXCEEDED),
    "ValidationFailed": ("False", REASON_VALIDATION_FAILED),
    "Cancelled": ("False", REASON_CANCELLED),
    "Truncated": ("False", REASON_TRUNCATED),
    "BudgetExceeded": ("False", REASON_BUDGET_EXCEEDED),
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
        REASON_BUDGET_EXHAUSTED,
        REASON_POD_CREATION_FAILED,
        REASON_IMAGE_PULL_FAILED,
        REASON_JOB_LOST,
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


def _one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cap_output(output: str, max_bytes: int = MAX_STATUS_OUTPUT_BYTES) -> tuple[str, bool]:
    """``output`` cut (with the marker) to at most ``max_bytes`` UTF-8 bytes."""
    raw = output.encode()
    if len(raw) <= max_bytes:
        return output, False
    room = max_bytes - len(TRUNCATION_MARKER.encode())
    return raw[: max(room, 0)].decode(errors="ignore") + TRUNCATION_MARKER, True


def _conditions(obj: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not obj:
        return []
    return list((obj.get("status") or {}).get("conditions") or [])


def _job_condition(job: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    cond = get_condition(_conditions(job), type_)
    return cond if cond is not None and cond.get("status") == "True" else None


def _container_status(pod: Mapping[str, Any]) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if status.get("name") == CONTAINER_NAME:
            return dict(status)
    return dict(statuses[0]) if statuses else {}


def _terminated(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    state = _container_status(pod).get("state") or {}
    terminated = state.get("terminated")
    return dict(terminated) if terminated else None


def _waiting(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    state = _container_status(pod).get("state") or {}
    waiting = state.get("waiting")
    return dict(waiting) if waiting else None


def _created(obj: Mapping[str, Any]) -> datetime | None:
    return parse_time((obj.get("metadata") or {}).get("creationTimestamp"))


def _name(obj: Mapping[str, Any] | None) -> str | None:
    if not obj:
        return None
    name = (obj.get("metadata") or {}).get("name")
    return str(name) if name else None


def latest_pod(pods: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The most recently created pod (the one that decides the run)."""
    if not pods:
        return None
    epoch = datetime.min.replace(tzinfo=UTC)
    return max(pods, key=lambda p: (_created(p) or epoch, _name(p) or ""))


def parse_result(message: str | None) -> RunResult | None:
    """The runner's RunResult from a termination message, or None if it is not one."""
    if not message:
        return None
    text = message.strip()
    if not text.startswith("{"):
        return None
    try:
        return RunResult.model_validate(json.loads(text))
    except (ValueError, ValidationError):
        return None


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1]
    try:  # JSON-lines audit: prefer a message field
        doc = json.loads(last)
        if isinstance(doc, dict):
            for key in ("message", "error", "msg"):
                if isinstance(doc.get(key), str) and doc[key]:
                    return str(doc[key])
    except ValueError:
        pass
    return last


def outcome_from_pod(pod: Mapping[str, Any]) -> Verdict | None:
    """The verdict a terminated runner container gives, None while it has not terminated."""
    terminated = _terminated(pod)
    phase = (pod.get("status") or {}).get("phase")
    if terminated is None:
        if phase in ("Succeeded", "Failed"):
            # Terminated without a container status (e.g. deleted before it started).
            reason = (pod.get("status") or {}).get("reason") or phase
            message = (pod.get("status") or {}).get("message") or f"pod {phase.lower()}"
            status_reason: tuple[Status, str] = (
                ("True", REASON_SUCCEEDED) if phase == "Succeeded" else ("False", REASON_FAILED)
            )
            return Verdict(
                phase="Finished",
                status=status_reason[0],
                reason=status_reason[1],
                message=_one_line(f"{reason}: {message}"),
                pod_name=_name(pod),
            )
        return None
    exit_code = terminated.get("exitCode")
    result = parse_result(terminated.get("message"))
    started = terminated.get("startedAt")
    finished = terminated.get("finishedAt")
    base = Verdict(
        phase="Finished",
        status="Unknown",
        reason="",
        exit_code=exit_code if isinstance(exit_code, int) else None,
        pod_name=_name(pod),
        start_time=started or (pod.get("status") or {}).get("startTime"),
        completion_time=finished,
        result=result,
    )
    if result is not None:
        status, reason = _OUTCOMES[result.outcome]
        message = result.message
        if not message:
            message = (
                "the run succeeded" if reason == REASON_SUCCEEDED else f"the run ended: {reason}"
            )
        if result.outcome == "AwaitingReview" and result.review_items and not result.message:
            message = "awaiting review: " + "; ".join(i.question for i in result.review_items)
        stage: Phase = "Parked" if result.outcome == "AwaitingReview" else "Finished"
        return replace(base, phase=stage, status=status, reason=reason, message=_one_line(message))
    text = str(terminated.get("message") or "")
    detail = _one_line(_last_line(text)) if text else ""
    why = str(terminated.get("reason") or "")
    if exit_code == 0:
        msg = "the runner exited 0 without writing a result"
        return replace(base, status="True", reason=REASON_SUCCEEDED, message=msg)
    if exit_code == EXIT_VALIDATION_FAILED:
        msg = detail or "the runner rejected its bundle (exit code 2)"
        return replace(base, status="False", reason=REASON_VALIDATION_FAILED, message=msg)
    if why == "OOMKilled":
        msg = "the runner ran out of memory (OOMKilled); raise the Workspace runtime limits"
        return replace(base, status="False", reason=REASON_FAILED, message=msg)
    msg = f"the runner exited with code {exit_code}"
    if why and why not in ("Error", "Completed"):
        msg += f" ({why})"
    if detail:
        msg += f": {detail}"
    return replace(base, status="False", reason=REASON_FAILED, message=_one_line(msg))


def _pod_start_problem(
    pod: Mapping[str, Any], now: datetime, grace: float
) -> tuple[Verdict | None, float | None]:
    """A pending pod stuck on its image or configuration: (verdict, recheck after)."""
    waiting = _waiting(pod)
    if waiting is None:
        return None, None
    reason = str(waiting.get("reason") or "")
    message = _one_line(str(waiting.get("message") or reason))
    created = _created(pod) or now
    age = (now - created).total_seconds()
    if reason in _PULL_FATAL or (reason in _PULL_RETRY and age >= grace):
        verdict = Verdict(
            phase="Finished",
            status="False",
            reason=REASON_IMAGE_PULL_FAILED,
            message=_one_line(f"cannot pull the runtime image: {message}"),
            pod_name=_name(pod),
            stop_job=True,
        )
        return verdict, None
    if reason in _CONFIG_ERRORS and age >= grace:
        verdict = Verdict(
            phase="Finished",
            status="False",
            reason=REASON_POD_CREATION_FAILED,
            message=_one_line(f"the runner's container cannot be created: {message}"),
            pod_name=_name(pod),
            stop_job=True,
        )
        return verdict, None
    if reason in _PULL_RETRY | _CONFIG_ERRORS:
        verdict = Verdict(
            phase="Pending",
            status="Unknown",
            reason=REASON_PENDING,
            message=_one_line(f"pod {_name(pod)}: {reason}: {message}"),
            pod_name=_name(pod),
        )
        return verdict, max(grace - age, 1.0)
    return None, None


def _failed_create(
    events: Sequence[Mapping[str, Any]], now: datetime
) -> tuple[str, float | None] | None:
    """The newest FailedCreate event message of the Job and, while it may still pass, the
    seconds until it counts as final (None: final now).

    A refusal is final once the Job controller has kept getting it for
    :data:`FAILED_CREATE_GRACE_SECONDS` (a missing service account, a quota that stays
    exceeded, an admission policy); a quota or "try again" refusal never is by itself.
    """
    failed = [e for e in events if e.get("reason") == "FailedCreate"]
    if not failed:
        return None

    def when(e: Mapping[str, Any]) -> str:
        return str(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or "")

    newest = max(failed, key=when)
    message = _one_line(str(newest.get("message") or newest.get("note") or ""))
    if "exceeded quota" in message or "try again" in message.lower():
        return message, float(FAILED_CREATE_GRACE_SECONDS)
    seen = [
        parse_time(e.get("firstTimestamp") or e.get("eventTime") or e.get("lastTimestamp"))
        for e in failed
    ]
    first = min((t for t in seen if t is not None), default=now)
    age = (now - first).total_seconds()
    if age >= FAILED_CREATE_GRACE_SECONDS:
        return message, None
    return message, max(FAILED_CREATE_GRACE_SECONDS - age, 1.0)


def derive(
    *,
    job: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]] = (),
    now: datetime | None = None,
    timeout_seconds: int | None = None,
    pod_start_grace_seconds: float = DEFAULT_POD_START_GRACE_SECONDS,
) -> Verdict:
    """The run's verdict from its (current) Job, that Job's pods and the Job's Events.

    ``job`` None with no terminated pod is ``Lost`` (the caller decides: create, recreate
    or fail). A terminated pod decides the outcome even when its Job is already gone.
    """
    now = now or datetime.now(UTC)
    jname = _name(job)
    pod = latest_pod(pods)
    pname = _name(pod)
    job_status = (job or {}).get("status") or {}
    job_start = job_status.get("startTime")

    def done(v: Verdict) -> Verdict:
        return replace(
            v,
            job_name=jname,
            pod_name=v.pod_name or pname,
            start_time=v.start_time or job_start,
            completion_time=v.completion_time or job_status.get("completionTime") or rfc3339(now),
        )

    if job is None:
        # The pod outlives its Job (outcome finalizer). Its outcome counts unless the pod was
        # killed because the Job went away (a signal, or the runner's own Cancelled result).
        if pod is not None:
            verdict = outcome_from_pod(pod)
            killed = verdict is not None and (
                (verdict.exit_code is not None and verdict.exit_code >= 128)
                or verdict.reason == REASON_CANCELLED
                or (verdict.exit_code is None and verdict.result is None)
            )
            if verdict is not None and not killed:
                return done(verdict)
        return Verdict(phase="Lost", status="Unknown", reason=REASON_JOB_LOST, pod_name=pname)

    spec = job.get("spec") or {}
    complete = _job_condition(job, "Complete") or _job_condition(job, "SuccessCriteriaMet")
    failed = _job_condition(job, "Failed") or _job_condition(job, "FailureTarget")
    if complete is not None:
        succeeded = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        chosen = latest_pod(succeeded) or pod
        verdict = outcome_from_pod(chosen) if chosen is not None else None
        if verdict is None:
            verdict = Verdict(
                phase="Finished",
                status="True",
                reason=REASON_SUCCEEDED,
                message="the Job completed (no pod left to read the result from)",
            )
        return done(verdict)
    if failed is not None:
        job_reason = str(failed.get("reason") or "")
        verdict = outcome_from_pod(pod) if pod is not None else None
        if job_reason == "DeadlineExceeded":
            if verdict is None or verdict.reason != REASON_TIMED_OUT:
                limit = f" of {timeout_seconds}s" if timeout_seconds else ""
                message = f"the run exceeded its timeout{limit} and was stopped"
                verdict = Verdict(
                    phase="Finished",
                    status="False",
                    reason=REASON_TIMED_OUT,
                    message=message,
                    pod_name=pname,
                    result=verdict.result if verdict else None,
                )
            return done(verdict)
        if verdict is None:
            message = _one_line(str(failed.get("message") or job_reason or "the Job failed"))
            verdict = Verdict(
                phase="Finished", status="False", reason=REASON_FAILED, message=message
            )
        return done(verdict)

    # The Job has not concluded yet: the pod may already have.
    backoff_limit = int(spec.get("backoffLimit") or 0)
    if pod is not None:
        pod_phase = (pod.get("status") or {}).get("phase")
        deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        disrupted = get_condition(_conditions(pod), "DisruptionTarget")
        if pod_phase == "Succeeded":
            verdict = outcome_from_pod(pod)
            if verdict is not None:
                return done(verdict)
        if pod_phase == "Failed" and not deleting and not disrupted:
            failures = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
            verdict = outcome_from_pod(pod)
            exhausted = failures > backoff_limit
            if verdict is not None and (exhausted or verdict.reason == REASON_VALIDATION_FAILED):
                return done(verdict)
        if pod_phase == "Running":
            return Verdict(
                phase="Running",
                status="Unknown",
                reason=REASON_RUNNING,
                message=f"pod {pname} is running",
                job_name=jname,
                pod_name=pname,
                start_time=(pod.get("status") or {}).get("startTime") or job_start,
            )
        if pod_phase == "Pending":
            problem, recheck = _pod_start_problem(pod, now, pod_start_grace_seconds)
            if problem is not None:
                if problem.final:
                    return done(problem)
                return replace(problem, job_name=jname, recheck_after=recheck)
            scheduled = get_condition(_conditions(pod), "PodScheduled")
            message = f"waiting for pod {pname} to start"
            settle = None
            if scheduled is not None and scheduled.get("status") == "False":
                message = _one_line(
                    f"pod {pname} is not scheduled: {scheduled.get('message') or ''}".rstrip(": ")
                )
            else:
                # creationTimestamp is whole seconds, rounded down: the age read is at
                # least the real one, so the quiet time is between 1 s and this.
                age = (now - (_created(pod) or now)).total_seconds()
                settle = (
                    POD_STARTING_QUIET_SECONDS - age if age < POD_STARTING_QUIET_SECONDS else None
                )
            return Verdict(
                phase="Pending",
                status="Unknown",
                reason=REASON_PENDING,
                message=message,
                job_name=jname,
                pod_name=pname,
                recheck_after=settle,
                quiet=settle is not None,
            )
        # A failed/deleting pod the Job controller will replace: still running.
        return Verdict(
            phase="Running",
            status="Unknown",
            reason=REASON_RUNNING,
            message=f"pod {pname} ended; waiting for the Job controller",
            job_name=jname,
            pod_name=pname,
            start_time=job_start,
        )
    created = _failed_create(events, now)
    if created is not None:
        message, recheck = created
        if recheck is None:
            verdict = Verdict(
                phase="Finished",
                status="False",
                reason=REASON_POD_CREATION_FAILED,
                message=_one_line(f"the Job cannot create its pod: {message}"),
                stop_job=True,
            )
            return done(verdict)
        return Verdict(
            phase="Pending",
            status="Unknown",
            reason=REASON_PENDING,
            message=_one_line(f"the Job cannot create its pod yet: {message}"),
            job_name=jname,
            recheck_after=recheck,
        )
    return Verdict(
        phase="Pending",
        status="Unknown",
        reason=REASON_PENDING,
        message=f"waiting for Job {jname} to create its pod",
        job_name=jname,
    )


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


def status_patch(
    current: Mapping[str, Any] | None,
    verdict: Verdict,
    generation: int,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The status fields to merge-patch for ``verdict`` (conditions via the one helper)."""
    current = current or {}
    stamp = rfc3339(now or datetime.now(UTC))
    conditions = set_condition(
        current.get("conditions"),
        SUCCEEDED,
        verdict.status,
        verdict.reason,
        verdict.message,
        generation=generation,
        now=stamp,
    )
    patch: dict[str, Any] = {"observedGeneration": generation, "conditions": conditions}
    if verdict.job_name:
        patch["jobName"] = verdict.job_name
    if verdict.pod_name:
        patch["podName"] = verdict.pod_name
    if verdict.start_time and not current.get("startTime"):
        patch["startTime"] = verdict.start_time
    if verdict.final:
        patch["completionTime"] = verdict.completion_time or stamp
        if not current.get("startTime") and not verdict.start_time:
            patch["startTime"] = patch["completionTime"]
    result = verdict.result
    if result is not None:
        output, cut = cap_output(result.output)
        patch["output"] = output
        patch["outputTruncated"] = result.output_truncated or cut
        patch["usage"] = result.usage.wire()
        patch["steps"] = result.steps
        patch["toolCalls"] = result.tool_calls
        patch["reviewItems"] = [item.wire() for item in result.review_items]
        patch["skills"] = [item.wire() for item in result.skills]
    return patch


def pending(message: str) -> Verdict:
    """The verdict of a Run whose target is not Ready (nothing created yet)."""
    return Verdict(
        phase="Pending", status="Unknown", reason=REASON_PENDING, message=_one_line(message)
    )


def final(reason: str, message: str, status: Status = "False") -> Verdict:
    """A terminal verdict decided by the operator itself (cancel, lost, invalid)."""
    return Verdict(phase="Finished", status=status, reason=reason, message=_one_line(message))


__all__ = [
    "FINAL_REASONS",
    "SUCCEEDED",
    "Verdict",
    "cap_output",
    "derive",
    "final",
    "is_final",
    "is_parked",
    "outcome_from_pod",
    "parse_result",
    "pending",
    "rfc3339",
    "status_patch",
]
