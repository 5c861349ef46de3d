"""Run status from the Job and pod only: every reason, restarts recompute the same verdict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from swarmkit_api.bundle import TRUNCATION_MARKER, RunResult
from swarmkit_api.run import TokenUsage
from swarmkit_operator.builders.run_pod import secret_not_found
from swarmkit_operator.builders.run_status import (
    FAILED_CREATE_GRACE_SECONDS,
    cap_output,
    derive,
    is_final,
    is_parked,
    parse_result,
    pending,
    status_patch,
)
from swarmkit_operator.runs.summaries import pod_summary

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def ts(seconds_ago: float = 0) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).isoformat().replace("+00:00", "Z")


def job(*conditions: tuple[str, str], backoff: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": "run-x-abcde", "creationTimestamp": ts(30)},
        "spec": {"backoffLimit": backoff},
        "status": {
            "startTime": ts(30),
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": f"{t} {r}"}
                for t, r in conditions
            ],
        },
    }


def pod(
    phase: str,
    *,
    name: str = "run-x-abcde-p1",
    terminated: dict[str, Any] | None = None,
    waiting: dict[str, Any] | None = None,
    age: float = 20,
    conditions: list[dict[str, Any]] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    state: dict[str, Any] = {}
    if terminated is not None:
        state["terminated"] = terminated
    elif waiting is not None:
        state["waiting"] = waiting
    else:
        state["running"] = {"startedAt": ts(age - 1)}
    meta: dict[str, Any] = {"name": name, "creationTimestamp": ts(age)}
    if deleting:
        meta["deletionTimestamp"] = ts(0)
    return {
        "metadata": meta,
        "status": {
            "phase": phase,
            "startTime": ts(age),
            "conditions": conditions or [],
            "containerStatuses": [{"name": "runner", "state": state}],
        },
    }


def result(outcome: str = "Succeeded", **kw: Any) -> str:
    return RunResult.model_validate({"outcome": outcome, **kw}).to_termination_message()


def term(exit_code: int, message: str = "", reason: str = "Completed") -> dict[str, Any]:
    return {
        "exitCode": exit_code,
        "reason": reason,
        "message": message,
        "startedAt": ts(15),
        "finishedAt": ts(1),
    }


def test_success_with_output_and_usage() -> None:
    msg = result(
        output="the verdict is pass",
        usage={"inputTokens": 10, "outputTokens": 3},
        steps=3,
        toolCalls=2,
    )
    v = derive(
        job=job(("Complete", "CompletionsReached")),
        pods=[pod("Succeeded", terminated=term(0, msg))],
        now=NOW,
    )
    assert (v.phase, v.status, v.reason) == ("Finished", "True", "Succeeded")
    patch = status_patch({}, v, generation=1, now=NOW)
    assert patch["output"] == "the verdict is pass"
    assert patch["usage"] == TokenUsage(input_tokens=10, output_tokens=3).wire()
    assert patch["steps"] == 3 and patch["toolCalls"] == 2
    assert patch["jobName"] == "run-x-abcde" and patch["podName"] == "run-x-abcde-p1"
    assert patch["startTime"] == ts(15) and patch["completionTime"] == ts(1)
    assert is_final(patch["conditions"])


def test_skill_usage_is_copied_to_status_skills() -> None:
    skills = [
        {
            "agent": "lead",
            "loaded": ["incident-triage"],
            "loads": 1,
            "filesRead": [{"skill": "incident-triage", "path": "reference/m.md"}],
            "fileReads": 1,
            "scripts": [
                {"skill": "incident-triage", "path": "scripts/c.py", "runs": 2, "failures": 1}
            ],
            "scriptRuns": 2,
            "scriptFailures": 1,
        }
    ]
    v = derive(
        job=job(("Complete", "CompletionsReached")),
        pods=[pod("Succeeded", terminated=term(0, result(output="ok", skills=skills)))],
        now=NOW,
    )
    patch = status_patch({}, v, generation=1, now=NOW)
    [usage] = patch["skills"]
    assert usage["agent"] == "lead" and usage["loaded"] == ["incident-triage"]
    assert usage["filesRead"] == [{"skill": "incident-triage", "path": "reference/m.md"}]
    assert usage["scripts"][0]["failures"] == 1 and usage["truncated"] is False


def test_pod_success_decides_before_the_job_controller() -> None:
    v = derive(job=job(), pods=[pod("Succeeded", terminated=term(0, result(output="ok")))], now=NOW)
    assert (v.status, v.reason) == ("True", "Succeeded")


def test_runner_failure_carries_its_message() -> None:
    msg = result("Failed", message="model API returned 401 after 3 retries")
    v = derive(
        job=job(("Failed", "BackoffLimitExceeded")),
        pods=[pod("Failed", terminated=term(1, msg, "Error"))],
        now=NOW,
    )
    assert (v.status, v.reason, v.message) == (
        "False",
        "Failed",
        "model API returned 401 after 3 retries",
    )
    # decided from the pod alone when backoffLimit is 0
    v2 = derive(job=job(), pods=[pod("Failed", terminated=term(1, msg, "Error"))], now=NOW)
    assert (v2.status, v2.reason) == ("False", "Failed")
    # with retries left, the Job decides
    v3 = derive(job=job(backoff=1), pods=[pod("Failed", terminated=term(1, msg, "Error"))], now=NOW)
    assert v3.phase == "Running"


def test_crash_without_result_uses_the_log_tail() -> None:
    logs = '{"event":"start"}\nTraceback (most recent call last):\nRuntimeError: boom\n'
    v = derive(
        job=job(("Failed", "BackoffLimitExceeded")),
        pods=[pod("Failed", terminated=term(1, logs, "Error"))],
        now=NOW,
    )
    assert v.reason == "Failed" and "code 1" in v.message and "RuntimeError: boom" in v.message
    v = derive(
        job=job(("Failed", "PodFailurePolicy")),
        pods=[pod("Failed", terminated=term(2, "invalid bundle: agents: missing"))],
        now=NOW,
    )
    assert (v.reason, v.message) == ("ValidationFailed", "invalid bundle: agents: missing")
    v = derive(
        job=job(("Failed", "BackoffLimitExceeded")),
        pods=[pod("Failed", terminated=term(137, "", "OOMKilled"))],
        now=NOW,
    )
    assert v.reason == "Failed" and "memory" in v.message


def test_outcomes_map_to_reasons() -> None:
    for outcome, status, reason in [
        ("TimedOut", "False", "TimedOut"),
        ("LimitExceeded", "False", "LimitExceeded"),
        ("Cancelled", "False", "Cancelled"),
        ("ValidationFailed", "False", "ValidationFailed"),
        ("AwaitingReview", "Unknown", "AwaitingReview"),
    ]:
        v = derive(
            job=job(("Complete", "x")),
            pods=[pod("Succeeded", terminated=term(0, result(outcome)))],
            now=NOW,
        )
        assert (v.status, v.reason) == (status, reason), outcome
    awaiting = status_patch(
        {},
        derive(
            job=job(("Complete", "x")),
            pods=[
                pod(
                    "Succeeded",
                    terminated=term(0, result("AwaitingReview", message="approve deploy?")),
                )
            ],
            now=NOW,
        ),
        1,
    )
    # parked is not over: it resumes after the decision
    assert not is_final(awaiting["conditions"]) and is_parked(awaiting["conditions"])
    assert "completionTime" not in awaiting


def test_deadline_is_timed_out() -> None:
    v = derive(
        job=job(("FailureTarget", "DeadlineExceeded")),
        pods=[pod("Running", deleting=True)],
        now=NOW,
        timeout_seconds=5,
    )
    assert (v.status, v.reason) == ("False", "TimedOut") and "5s" in v.message
    v = derive(job=job(("Failed", "DeadlineExceeded")), pods=[], now=NOW)
    assert v.reason == "TimedOut"


def test_running_and_pending() -> None:
    v = derive(job=job(), pods=[pod("Running")], now=NOW)
    assert (v.phase, v.status, v.reason) == ("Running", "Unknown", "Running")
    assert v.start_time == ts(20)
    v = derive(job=job(), pods=[], now=NOW)
    assert (v.phase, v.reason) == ("Pending", "Pending")
    unsched = [{"type": "PodScheduled", "status": "False", "message": "0/1 nodes available"}]
    v = derive(
        job=job(), pods=[pod("Pending", waiting={"reason": "x"}, conditions=unsched)], now=NOW
    )
    assert v.reason == "Pending" and "0/1 nodes" in v.message


def test_image_pull_and_config_errors_fail_after_grace() -> None:
    backoff = {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}
    early = derive(job=job(), pods=[pod("Pending", waiting=backoff, age=5)], now=NOW)
    assert early.reason == "Pending" and early.recheck_after and 50 <= early.recheck_after <= 60
    late = derive(job=job(), pods=[pod("Pending", waiting=backoff, age=90)], now=NOW)
    assert (late.status, late.reason, late.stop_job) == ("False", "ImagePullFailed", True)
    bad = derive(
        job=job(), pods=[pod("Pending", waiting={"reason": "InvalidImageName"}, age=1)], now=NOW
    )
    assert bad.reason == "ImagePullFailed"
    cfg = {"reason": "CreateContainerConfigError", "message": 'configmap "bundle" not found'}
    late = derive(job=job(), pods=[pod("Pending", waiting=cfg, age=90)], now=NOW)
    assert (late.reason, late.stop_job) == ("PodCreationFailed", True)


def _env_pod(waiting: dict[str, Any], age: float) -> dict[str, Any]:
    """A Run pod taking two keys of Secret llm and one of gh as env."""
    p = pod("Pending", waiting=waiting, age=age)
    p["metadata"]["namespace"] = "team-a"
    env = [
        {"name": f"SWARMKIT_SECRET_{i}", "valueFrom": {"secretKeyRef": {"name": n, "key": k}}}
        for i, (n, k) in enumerate([("llm", "anthropic"), ("llm", "openai"), ("gh", "token")])
    ]
    p["spec"] = {"containers": [{"name": "runner", "env": [*env, {"name": "X", "value": "1"}]}]}
    return p


def test_a_missing_secret_is_named_from_the_pod_then_fails_after_grace() -> None:
    """The operator reads no Secret (issue 41): the kubelet's CreateContainerConfigError
    names it, and the Run says which Secret and key(s), never a value."""
    missing = {"reason": "CreateContainerConfigError", "message": 'secret "llm" not found'}
    early = derive(job=job(), pods=[_env_pod(missing, age=5)], now=NOW)
    assert (early.phase, early.status, early.reason) == ("Pending", "Unknown", "SecretNotFound")
    assert early.message == (
        "pod run-x-abcde-p1 waits: Secret 'llm' (keys 'anthropic', 'openai') not found "
        "(create it in namespace team-a)"
    )
    assert early.recheck_after and 50 <= early.recheck_after <= 60 and not early.stop_job
    # the Runs controller's pod index keeps just enough for this: the Secret-key env entries
    summary = pod_summary(_env_pod(missing, age=5))
    assert [e["name"] for e in summary["spec"]["containers"][0]["env"]] == [
        "SWARMKIT_SECRET_0",
        "SWARMKIT_SECRET_1",
        "SWARMKIT_SECRET_2",
    ]
    assert derive(job=job(), pods=[summary], now=NOW).message == early.message
    late = derive(job=job(), pods=[_env_pod(missing, age=90)], now=NOW)
    assert (late.status, late.reason, late.stop_job) == ("False", "SecretNotFound", True)
    assert late.message == (
        "Secret 'llm' (keys 'anthropic', 'openai') not found: the runner's container cannot start"
    )
    no_key = {
        "reason": "CreateContainerConfigError",
        "message": "couldn't find key token in Secret team-a/gh",
    }
    late = derive(job=job(), pods=[_env_pod(no_key, age=90)], now=NOW)
    assert (late.reason, late.message) == (
        "SecretNotFound",
        "Secret 'gh' has no key 'token': the runner's container cannot start",
    )


def test_secret_not_found_reads_any_container_and_only_that_reason() -> None:
    waiting = {"reason": "CreateContainerConfigError", "message": 'secret "tok" not found'}
    served = {
        "spec": {"containers": [{"name": "gateway", "env": []}]},
        "status": {"containerStatuses": [{"name": "gateway", "state": {"waiting": waiting}}]},
    }
    assert secret_not_found(served) == "Secret 'tok' not found"
    other = {**waiting, "reason": "ContainerCreating"}
    served["status"]["containerStatuses"][0]["state"]["waiting"] = other
    assert secret_not_found(served) is None
    assert secret_not_found({}) is None


def test_failed_create_events() -> None:
    forbidden = {
        "reason": "FailedCreate",
        "message": 'pods "x" is forbidden: violates PodSecurity',
        "firstTimestamp": ts(20),
        "lastTimestamp": ts(1),
    }
    v = derive(job=job(), pods=[], events=[forbidden], now=NOW)
    assert (v.status, v.reason) == ("False", "PodCreationFailed") and "PodSecurity" in v.message
    quota = {"reason": "FailedCreate", "message": "exceeded quota: pods", "lastTimestamp": ts(1)}
    v = derive(job=job(), pods=[], events=[quota], now=NOW)
    assert (v.status, v.reason) == ("Unknown", "Pending")


def test_failed_create_refusal_that_may_pass_waits_for_the_job_controllers_retries() -> None:
    # Right after a kube-apiserver restart the RBAC authorizer refuses the Job controller
    # until its caches fill: the run waits (rechecking) instead of failing at once.
    rbac = {
        "reason": "FailedCreate",
        "message": 'pods is forbidden: RBAC: clusterrole "system:controller:job-controller" '
        "not found",
        "firstTimestamp": ts(2),
        "lastTimestamp": ts(1),
    }
    v = derive(job=job(), pods=[], events=[rbac], now=NOW)
    assert (v.status, v.reason) == (
        "Unknown",
        "Pending",
    ) and "cannot create its pod yet" in v.message
    assert v.recheck_after is not None and 12 <= v.recheck_after <= 13
    # Still refused after the grace: the run fails, naming the refusal.
    rbac["firstTimestamp"] = ts(FAILED_CREATE_GRACE_SECONDS + 1)
    v = derive(job=job(), pods=[], events=[rbac], now=NOW)
    assert (v.status, v.reason, v.stop_job) == ("False", "PodCreationFailed", True)
    assert "forbidden" in v.message


def test_lost_job_but_finished_pod_keeps_the_outcome() -> None:
    v = derive(job=None, pods=[], now=NOW)
    assert v.phase == "Lost"
    v = derive(
        job=None,
        pods=[pod("Succeeded", terminated=term(0, result(output="done")), deleting=True)],
        now=NOW,
    )
    assert (v.status, v.reason) == ("True", "Succeeded") and v.result and v.result.output == "done"
    v = derive(job=None, pods=[pod("Running", deleting=True)], now=NOW)
    assert v.phase == "Lost"


def test_latest_pod_decides() -> None:
    old = pod(
        "Failed", name="p-old", terminated=term(1, result("Failed", message="first")), age=100
    )
    new = pod("Succeeded", name="p-new", terminated=term(0, result(output="second")), age=10)
    v = derive(job=job(("Complete", "x"), backoff=1), pods=[old, new], now=NOW)
    assert v.pod_name == "p-new" and v.reason == "Succeeded"


def test_status_patch_keeps_transition_time_and_start_time() -> None:
    first = status_patch({}, pending("waiting for Topology t"), 1, now=NOW)
    later = status_patch(first, pending("waiting for Agent a"), 1, now=NOW + timedelta(seconds=5))
    (cond,) = later["conditions"]
    assert cond["lastTransitionTime"] == ts(0) and cond["message"] == "waiting for Agent a"
    running = derive(job=job(), pods=[pod("Running")], now=NOW)
    p1 = status_patch(later, running, 1, now=NOW)
    p2 = status_patch({**later, **p1}, running, 1, now=NOW)
    assert "startTime" in p1 and "startTime" not in p2


def test_output_cap_and_result_parsing() -> None:
    out, cut = cap_output("é" * 5000, 3072)
    assert cut and out.endswith(TRUNCATION_MARKER) and len(out.encode()) <= 3072
    assert cap_output("short") == ("short", False)
    big = RunResult(outcome="Succeeded", output="z" * 10_000).to_termination_message()
    parsed = parse_result(big)
    assert (
        parsed is not None and parsed.output_truncated and parsed.output.endswith(TRUNCATION_MARKER)
    )
    assert parse_result("not json") is None and parse_result('{"outcome": "Nope"}') is None


def test_pod_killed_because_its_job_was_deleted_is_lost() -> None:
    killed = pod("Failed", terminated=term(143, "", "Error"), deleting=True)
    assert derive(job=None, pods=[killed], now=NOW).phase == "Lost"
    cancelled = pod(
        "Failed", terminated=term(1, result("Cancelled", message="SIGTERM")), deleting=True
    )
    assert derive(job=None, pods=[cancelled], now=NOW).phase == "Lost"
    failed = pod("Failed", terminated=term(1, result("Failed", message="bad")), deleting=True)
    v = derive(job=None, pods=[failed], now=NOW)
    assert (v.phase, v.reason, v.message) == ("Finished", "Failed", "bad")


def test_each_pods_audit_chain_head_is_kept_oldest_first() -> None:
    def ended(pod_name: str, head: str, lines: int) -> Any:
        audit = {"head": head * 64, "lines": lines}
        term_ = term(0, result(output="ok", audit=audit))
        return derive(job=job(), pods=[pod("Succeeded", name=pod_name, terminated=term_)], now=NOW)

    first = status_patch({}, ended("p1", "a", 3), 1, now=NOW)
    assert first["audit"] == [{"head": "a" * 64, "lines": 3, "pod": "p1"}]
    # the resumed Run's next pod: appended, the first pod's head carried (lists are replaced)
    second = status_patch(first, ended("p2", "b", 2), 1, now=NOW)
    assert [(h["pod"], h["lines"]) for h in second["audit"]] == [("p1", 3), ("p2", 2)]
    # a pod reporting again replaces its own entry in place
    again = status_patch({**first, **second}, ended("p1", "c", 5), 1, now=NOW)
    assert [(h["pod"], h["head"][0]) for h in again["audit"]] == [("p1", "c"), ("p2", "b")]
    # the one object an operator before per-pod heads wrote is kept as the first
    legacy = {"audit": {"head": "d" * 64, "lines": 1, "pod": "p0"}}
    upgraded = status_patch(legacy, ended("p1", "a", 3), 1, now=NOW)
    assert [h["pod"] for h in upgraded["audit"]] == ["p0", "p1"]
