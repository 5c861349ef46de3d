"""What a Run's Job, pod and Events say, read one object at a time (pure).

The runner's container states and termination message give the outcome
(:func:`outcome_from_pod`); a pending pod stuck on its image or configuration, or a Job
whose pod creation keeps being refused, gives a failure once its grace has passed.
:mod:`.run_status` combines these into the Run's verdict.

A missing credential is found here too, not by reading Secrets (the operator holds no verb
on them, issue 41): the kubelet resolves a pod's ``secretKeyRef`` env and, when the Secret
or its key is missing, leaves the container waiting in ``CreateContainerConfigError`` with a
message naming them. :func:`secret_not_found` reads that back (for a served workload's pods
as well) into the Secret's name and key, never a value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from swarmkit_api.bundle import RunResult
from swarmkit_api.conditions import (
    REASON_FAILED,
    REASON_IMAGE_PULL_FAILED,
    REASON_PENDING,
    REASON_POD_CREATION_FAILED,
    REASON_SECRET_NOT_FOUND,
    REASON_SUCCEEDED,
    REASON_VALIDATION_FAILED,
)

from ..conditions import Status, get_condition
from .job import CONTAINER_NAME, EXIT_VALIDATION_FAILED
from .run_verdict import OUTCOMES, Phase, Verdict, one_line, parse_time

#: How long the Job controller's pod creation may keep failing before the run fails. It
#: retries with backoff, and some refusals pass: right after a kube-apiserver restart the
#: RBAC authorizer answers "forbidden ... clusterrole not found" until its caches fill.
FAILED_CREATE_GRACE_SECONDS = 15

_PULL_FATAL = {"InvalidImageName", "ErrImageNeverPull"}
_PULL_RETRY = {"ErrImagePull", "ImagePullBackOff", "RegistryUnavailable"}
_CONFIG_ERRORS = {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}


def conditions_of(obj: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not obj:
        return []
    return list((obj.get("status") or {}).get("conditions") or [])


def job_condition(job: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    cond = get_condition(conditions_of(job), type_)
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


#: The kubelet's messages (kubelet_pods.go makeEnvironmentVariables; the process node's
#: are the same): ``secret "x" not found`` and ``couldn't find key k in Secret ns/x``.
_SECRET_MISSING = re.compile(r'secrets? "([^"]+)" not found')
_SECRET_KEY_MISSING = re.compile(r"couldn't find key (\S+) in Secret [^/\s]+/(\S+)")


def _secret_keys_referenced(pod: Mapping[str, Any], secret: str) -> list[str]:
    """The keys of ``secret`` the pod's containers take as env (``secretKeyRef``)."""
    keys: set[str] = set()
    for container in (pod.get("spec") or {}).get("containers") or ():
        for env in container.get("env") or ():
            ref = (env.get("valueFrom") or {}).get("secretKeyRef") or {}
            if ref.get("name") == secret and ref.get("key"):
                keys.add(str(ref["key"]))
    return sorted(keys)


def secret_not_found(pod: Mapping[str, Any]) -> str | None:
    """What a container of ``pod`` waiting in ``CreateContainerConfigError`` lacks:
    ``Secret 'x' has no key 'k'`` or ``Secret 'x' (key 'k') not found``; None otherwise."""
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        waiting = (status.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") != "CreateContainerConfigError":
            continue
        message = str(waiting.get("message") or "")
        found = _SECRET_KEY_MISSING.search(message)
        if found:
            return f"Secret {found.group(2)!r} has no key {found.group(1)!r}"
        found = _SECRET_MISSING.search(message)
        if found:
            keys = _secret_keys_referenced(pod, found.group(1))
            named = ", ".join(repr(k) for k in keys)
            which = f" ({'key' if len(keys) == 1 else 'keys'} {named})" if keys else ""
            return f"Secret {found.group(1)!r}{which} not found"
    return None


def created_at(obj: Mapping[str, Any]) -> datetime | None:
    return parse_time((obj.get("metadata") or {}).get("creationTimestamp"))


def name_of(obj: Mapping[str, Any] | None) -> str | None:
    if not obj:
        return None
    name = (obj.get("metadata") or {}).get("name")
    return str(name) if name else None


def latest_pod(pods: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The most recently created pod (the one that decides the run)."""
    if not pods:
        return None
    epoch = datetime.min.replace(tzinfo=UTC)
    return max(pods, key=lambda p: (created_at(p) or epoch, name_of(p) or ""))


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
                message=one_line(f"{reason}: {message}"),
                pod_name=name_of(pod),
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
        pod_name=name_of(pod),
        start_time=started or (pod.get("status") or {}).get("startTime"),
        completion_time=finished,
        result=result,
    )
    if result is not None:
        status, reason = OUTCOMES[result.outcome]
        message = result.message
        if not message:
            message = (
                "the run succeeded" if reason == REASON_SUCCEEDED else f"the run ended: {reason}"
            )
        if result.outcome == "AwaitingReview" and result.review_items and not result.message:
            message = "awaiting review: " + "; ".join(i.question for i in result.review_items)
        stage: Phase = "Parked" if result.outcome == "AwaitingReview" else "Finished"
        return replace(base, phase=stage, status=status, reason=reason, message=one_line(message))
    text = str(terminated.get("message") or "")
    detail = one_line(_last_line(text)) if text else ""
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
    return replace(base, status="False", reason=REASON_FAILED, message=one_line(msg))


def pod_start_problem(
    pod: Mapping[str, Any], now: datetime, grace: float
) -> tuple[Verdict | None, float | None]:
    """A pending pod stuck on its image or configuration: (verdict, recheck after)."""
    waiting = _waiting(pod)
    if waiting is None:
        return None, None
    reason = str(waiting.get("reason") or "")
    message = one_line(str(waiting.get("message") or reason))
    created = created_at(pod) or now
    age = (now - created).total_seconds()
    secret = secret_not_found(pod)
    if secret is not None:
        # Waits (the kubelet retries: a Secret created now starts the pod) until its grace
        # has passed, then fails naming it; never a value, only the Secret and key.
        final = age >= grace
        verdict = Verdict(
            phase="Finished" if final else "Pending",
            status="False" if final else "Unknown",
            reason=REASON_SECRET_NOT_FOUND,
            message=one_line(
                f"{secret}: the runner's container cannot start"
                if final
                else f"pod {name_of(pod)} waits: {secret} (create it in namespace "
                f"{(pod.get('metadata') or {}).get('namespace', '')})"
            ),
            pod_name=name_of(pod),
            stop_job=final,
        )
        return verdict, None if final else max(grace - age, 1.0)
    if reason in _PULL_FATAL or (reason in _PULL_RETRY and age >= grace):
        verdict = Verdict(
            phase="Finished",
            status="False",
            reason=REASON_IMAGE_PULL_FAILED,
            message=one_line(f"cannot pull the runtime image: {message}"),
            pod_name=name_of(pod),
            stop_job=True,
        )
        return verdict, None
    if reason in _CONFIG_ERRORS and age >= grace:
        verdict = Verdict(
            phase="Finished",
            status="False",
            reason=REASON_POD_CREATION_FAILED,
            message=one_line(f"the runner's container cannot be created: {message}"),
            pod_name=name_of(pod),
            stop_job=True,
        )
        return verdict, None
    if reason in _PULL_RETRY | _CONFIG_ERRORS:
        verdict = Verdict(
            phase="Pending",
            status="Unknown",
            reason=REASON_PENDING,
            message=one_line(f"pod {name_of(pod)}: {reason}: {message}"),
            pod_name=name_of(pod),
        )
        return verdict, max(grace - age, 1.0)
    return None, None


#: The kubelet's FailedMount message naming a missing ConfigMap (real kubelet and process
#: node: ``configmap "x" not found`` / ``configmap x not found``).
_MISSING_CONFIG_MAP = re.compile(r'configmaps? "?([a-z0-9][a-z0-9.-]*)"? not found', re.I)


def failed_mount(events: Sequence[Mapping[str, Any]]) -> tuple[str, str | None] | None:
    """The newest ``FailedMount`` message among a pod's Events, and the ConfigMap it says
    is missing (None when it names none): the pod waits in ContainerCreating with no
    container state, so only its Events say why."""
    failed = [e for e in events if e.get("reason") == "FailedMount"]
    if not failed:
        return None
    newest = max(
        failed,
        key=lambda e: str(
            e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or ""
        ),
    )
    message = one_line(str(newest.get("message") or newest.get("note") or ""))
    missing = _MISSING_CONFIG_MAP.search(message)
    return message, missing.group(1) if missing else None


def failed_create(
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
    message = one_line(str(newest.get("message") or newest.get("note") or ""))
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
