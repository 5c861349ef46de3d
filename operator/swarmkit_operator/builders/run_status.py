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
Unknown            SecretNotFound  the pod waits for a Secret (key) its env names
                                (the kubelet's CreateContainerConfigError)
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
False              HarnessFailed  a harness node's CLI exited non-zero, gave no final
                                answer, or printed events that do not map
False              HarnessTimedOut  a harness node's CLI ran past the node's timeout
False              HarnessAskedQuestion  a harness node's CLI asked an interactive question
False              ValidationFailed  bundle or configuration invalid (exit code 2)
False              PodCreationFailed  the pod could not be created or configured
False              SecretNotFound  ... still missing after the pod start grace
False              ImagePullFailed    the runtime image cannot be pulled
False              JobLost      the Job vanished more often than allowed
False              TamperedObject  a bundle or checkpoint bears the run's name but not
                                the digest the operator recorded (never used), or
                                the runner found a mounted skill file that is not
                                the one the bundle records (exit code 2)
False              PinnedRevisionMissing  a bundle, skill revision or checkpoint the run
                                pinned is gone
=================  ===========  ===================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from swarmkit_api.audit_chain import status_heads
from swarmkit_api.conditions import (
    REASON_CANCELLED,
    REASON_FAILED,
    REASON_JOB_LOST,
    REASON_PENDING,
    REASON_POD_CREATION_FAILED,
    REASON_RUNNING,
    REASON_SUCCEEDED,
    REASON_TIMED_OUT,
    REASON_VALIDATION_FAILED,
    SUCCEEDED,
)

from ..conditions import get_condition, set_condition
from .run_pod import (
    FAILED_CREATE_GRACE_SECONDS,
    conditions_of,
    created_at,
    failed_create,
    job_condition,
    latest_pod,
    name_of,
    outcome_from_pod,
    parse_result,
    pod_start_problem,
)
from .run_verdict import (
    FINAL_REASONS,
    Verdict,
    cap_output,
    final,
    is_final,
    is_parked,
    one_line,
    parse_time,
    pending,
    rfc3339,
)

#: How long after its creation a pod that is starting as expected is not worth a status
#: write of its own (see ``Verdict.quiet``).
POD_STARTING_QUIET_SECONDS = 2.0
#: How long a pod may wait on an image pull / its configuration before the run fails.
DEFAULT_POD_START_GRACE_SECONDS = 60


@dataclass(frozen=True)
class _Observed:
    """What ``derive`` reads once and every step shares: the Job, its latest pod, the clock."""

    job: Mapping[str, Any] | None
    pods: Sequence[Mapping[str, Any]]
    pod: Mapping[str, Any] | None
    now: datetime

    @property
    def job_name(self) -> str | None:
        return name_of(self.job)

    @property
    def pod_name(self) -> str | None:
        return name_of(self.pod)

    @property
    def job_status(self) -> Mapping[str, Any]:
        return (self.job or {}).get("status") or {}

    @property
    def job_start(self) -> str | None:
        return self.job_status.get("startTime")

    def running(self, message: str, start_time: str | None) -> Verdict:
        """``Running``: the Job has a pod that is running (or will be replaced)."""
        return Verdict(
            phase="Running",
            status="Unknown",
            reason=REASON_RUNNING,
            message=message,
            job_name=self.job_name,
            pod_name=self.pod_name,
            start_time=start_time,
        )

    def done(self, v: Verdict) -> Verdict:
        """``v`` with the Job's names and times filled in where the pod did not give them."""
        return replace(
            v,
            job_name=self.job_name,
            pod_name=v.pod_name or self.pod_name,
            start_time=v.start_time or self.job_start,
            completion_time=v.completion_time
            or self.job_status.get("completionTime")
            or rfc3339(self.now),
        )


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
    seen = _Observed(job=job, pods=pods, pod=latest_pod(pods), now=now or datetime.now(UTC))
    if job is None:
        return _without_job(seen)
    if job_condition(job, "Complete") or job_condition(job, "SuccessCriteriaMet"):
        return _job_complete(seen)
    failed = job_condition(job, "Failed") or job_condition(job, "FailureTarget")
    if failed is not None:
        return _job_failed(seen, failed, timeout_seconds)
    # The Job has not concluded yet: the pod may already have.
    if seen.pod is not None:
        return _job_running(seen, seen.pod, pod_start_grace_seconds)
    return _no_pod_yet(seen, events)


def _without_job(seen: _Observed) -> Verdict:
    """The Job is gone: the pod that outlives it (outcome finalizer) may still decide."""
    # Its outcome counts unless the pod was killed because the Job went away (a signal, or
    # the runner's own Cancelled result).
    if seen.pod is not None:
        verdict = outcome_from_pod(seen.pod)
        killed = verdict is not None and (
            (verdict.exit_code is not None and verdict.exit_code >= 128)
            or verdict.reason == REASON_CANCELLED
            or (verdict.exit_code is None and verdict.result is None)
        )
        if verdict is not None and not killed:
            return seen.done(verdict)
    return Verdict(phase="Lost", status="Unknown", reason=REASON_JOB_LOST, pod_name=seen.pod_name)


def _job_complete(seen: _Observed) -> Verdict:
    """The Job completed: its succeeded pod's result, else a plain success."""
    succeeded = [p for p in seen.pods if (p.get("status") or {}).get("phase") == "Succeeded"]
    chosen = latest_pod(succeeded) or seen.pod
    verdict = outcome_from_pod(chosen) if chosen is not None else None
    if verdict is None:
        verdict = Verdict(
            phase="Finished",
            status="True",
            reason=REASON_SUCCEEDED,
            message="the Job completed (no pod left to read the result from)",
        )
    return seen.done(verdict)


def _job_failed(seen: _Observed, failed: Mapping[str, Any], timeout_seconds: int | None) -> Verdict:
    """The Job failed: a passed deadline is ``TimedOut``; else the pod's outcome or the Job's."""
    job_reason = str(failed.get("reason") or "")
    verdict = outcome_from_pod(seen.pod) if seen.pod is not None else None
    if job_reason == "DeadlineExceeded":
        if verdict is None or verdict.reason != REASON_TIMED_OUT:
            limit = f" of {timeout_seconds}s" if timeout_seconds else ""
            verdict = Verdict(
                phase="Finished",
                status="False",
                reason=REASON_TIMED_OUT,
                message=f"the run exceeded its timeout{limit} and was stopped",
                pod_name=seen.pod_name,
                result=verdict.result if verdict else None,
            )
        return seen.done(verdict)
    if verdict is None:
        message = one_line(str(failed.get("message") or job_reason or "the Job failed"))
        verdict = Verdict(phase="Finished", status="False", reason=REASON_FAILED, message=message)
    return seen.done(verdict)


def _job_running(seen: _Observed, pod: Mapping[str, Any], grace_seconds: float) -> Verdict:
    """The Job has not concluded and has a pod: the pod's phase decides."""
    pod_phase = (pod.get("status") or {}).get("phase")
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    disrupted = get_condition(conditions_of(pod), "DisruptionTarget")
    if pod_phase == "Succeeded":
        verdict = outcome_from_pod(pod)
        if verdict is not None:
            return seen.done(verdict)
    if pod_phase == "Failed" and not deleting and not disrupted:
        backoff_limit = int(((seen.job or {}).get("spec") or {}).get("backoffLimit") or 0)
        failures = sum(1 for p in seen.pods if (p.get("status") or {}).get("phase") == "Failed")
        verdict = outcome_from_pod(pod)
        exhausted = failures > backoff_limit
        if verdict is not None and (exhausted or verdict.reason == REASON_VALIDATION_FAILED):
            return seen.done(verdict)
    if pod_phase == "Running":
        pod_start = (pod.get("status") or {}).get("startTime")
        return seen.running(f"pod {seen.pod_name} is running", pod_start or seen.job_start)
    if pod_phase == "Pending":
        return _pod_pending(seen, pod, grace_seconds)
    # A failed/deleting pod the Job controller will replace: still running.
    message = f"pod {seen.pod_name} ended; waiting for the Job controller"
    return seen.running(message, seen.job_start)


def _pod_pending(seen: _Observed, pod: Mapping[str, Any], grace_seconds: float) -> Verdict:
    """A pending pod: a start problem (final after the grace), unscheduled, or starting."""
    problem, recheck = pod_start_problem(pod, seen.now, grace_seconds)
    if problem is not None:
        if problem.final:
            return seen.done(problem)
        return replace(problem, job_name=seen.job_name, recheck_after=recheck)
    pname = seen.pod_name
    scheduled = get_condition(conditions_of(pod), "PodScheduled")
    message = f"waiting for pod {pname} to start"
    settle = None
    if scheduled is not None and scheduled.get("status") == "False":
        message = one_line(
            f"pod {pname} is not scheduled: {scheduled.get('message') or ''}".rstrip(": ")
        )
    else:
        # creationTimestamp is whole seconds, rounded down: the age read is at
        # least the real one, so the quiet time is between 1 s and this.
        age = (seen.now - (created_at(pod) or seen.now)).total_seconds()
        settle = POD_STARTING_QUIET_SECONDS - age if age < POD_STARTING_QUIET_SECONDS else None
    return Verdict(
        phase="Pending",
        status="Unknown",
        reason=REASON_PENDING,
        message=message,
        job_name=seen.job_name,
        pod_name=pname,
        recheck_after=settle,
        quiet=settle is not None,
    )


def _no_pod_yet(seen: _Observed, events: Sequence[Mapping[str, Any]]) -> Verdict:
    """The Job has no pod yet: its warning Events say whether it cannot create one."""
    created = failed_create(events, seen.now)
    if created is not None:
        message, recheck = created
        if recheck is None:
            verdict = Verdict(
                phase="Finished",
                status="False",
                reason=REASON_POD_CREATION_FAILED,
                message=one_line(f"the Job cannot create its pod: {message}"),
                stop_job=True,
            )
            return seen.done(verdict)
        return Verdict(
            phase="Pending",
            status="Unknown",
            reason=REASON_PENDING,
            message=one_line(f"the Job cannot create its pod yet: {message}"),
            job_name=seen.job_name,
            recheck_after=recheck,
        )
    return Verdict(
        phase="Pending",
        status="Unknown",
        reason=REASON_PENDING,
        message=f"waiting for Job {seen.job_name} to create its pod",
        job_name=seen.job_name,
    )


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
        if result.audit is not None:  # the pod's chain head, for ``logs --verify``
            head = result.audit.model_copy(update={"pod": verdict.pod_name}).wire()
            patch["audit"] = audit_heads(current.get("audit"), head)
    return patch


def audit_heads(kept: Any, head: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod's audit chain head, oldest first: ``head`` replaces its pod's entry (a pod
    reports at each stage it ends) or is appended (a resumed Run's next pod). The list is
    written whole (a merge patch replaces lists), so the earlier pods' heads are carried; a
    single head an older operator wrote (an object) is kept as the first."""
    heads = status_heads(kept)
    same = [i for i, h in enumerate(heads) if h.get("pod") == head.get("pod")]
    if same:
        heads[same[0]] = head
        return heads
    return [*heads, head]


__all__ = [
    "DEFAULT_POD_START_GRACE_SECONDS",
    "FAILED_CREATE_GRACE_SECONDS",
    "FINAL_REASONS",
    "SUCCEEDED",
    "Verdict",
    "audit_heads",
    "cap_output",
    "derive",
    "final",
    "is_final",
    "is_parked",
    "outcome_from_pod",
    "parse_result",
    "parse_time",
    "pending",
    "rfc3339",
    "status_patch",
]
