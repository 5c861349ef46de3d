"""Runs end to end: real control plane, process node, operator process and runner process."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest

from swarmkit_api.bundle import TRUNCATION_MARKER
from swarmkit_devcluster.testing import Kube, pid_alive, pod_pids, wait_for

from .runs_support import (
    GROUP,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    debug,
    doc,
    finished,
    get,
    jobs,
    pods,
    reason_is,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)

MAX_RECREATIONS = 1
#: The status fields that record a Run's started Job (runs/start.py:start_record).
START_RECORD = ("jobName", "bundleConfigMap", "bundleSha256", "pinned", "jobRecreations")


pytestmark = pytest.mark.operator_settings(
    config={"maxJobRecreations": MAX_RECREATIONS},
    env={"SWARMKIT_POD_START_GRACE_SECONDS": "4"},
)


@pytest.fixture
def examples_ns(kube: Kube, namespace: str, operator: OperatorProcess) -> str:
    apply_examples(kube, namespace)
    wait_ready(kube, namespace, "Topology", "review-pipeline")
    return namespace


def test_run_succeeds_with_output_in_status(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    ns = examples_ns
    create(kube, ns, run_manifest("review-demo", correlationId="pr-42"))
    run = wait_run(kube, ns, "review-demo", finished, operator=operator)
    cond = succeeded(run)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Succeeded"), debug(
        kube, ns, operator
    )
    status = run["status"]
    assert "verdict is pass" in status["output"]
    assert status["jobName"].startswith("run-review-demo-")
    assert status["podName"].startswith(status["jobName"])
    assert status["startTime"] and status["completionTime"]
    assert status["bundleConfigMap"] == status["jobName"] + "-bundle"
    assert status["pinned"]["topology"]
    assert set(status["pinned"]["agents"]) == {"coordinator", "reviewer"}
    assert status["steps"] >= 3 and status["toolCalls"] >= 2
    assert "usage" in status
    (job,) = jobs(kube, ns)
    assert job.metadata.owner_references[0].uid == run["metadata"]["uid"]
    assert job.metadata.labels["swarmkit.dev/topology"] == "review-pipeline"
    assert job.spec.template.spec.automount_service_account_token is False
    # the pod's outcome finalizer was released once the outcome was recorded
    wait_for(
        lambda: all(
            "swarmkit.dev/run-outcome" not in (p.metadata.finalizers or []) for p in pods(kube, ns)
        ),
        20,
        message="the pods' outcome finalizers to be released",
    )
    bundle = kube.core.read_namespaced_config_map(status["bundleConfigMap"], ns)
    wait_for(
        lambda: (
            kube.core.read_namespaced_config_map(status["bundleConfigMap"], ns).metadata.labels.get(
                "swarmkit.dev/run-finished"
            )
            == "true"
        ),
        10,
    )
    assert bundle.immutable is True
    events = kube.core.list_namespaced_event(
        ns, field_selector=f"involvedObject.uid={run['metadata']['uid']}"
    )
    reasons = {e.reason for e in events.items}
    assert "Succeeded" in reasons


def test_target_not_ready_is_pending_then_runs(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    create(kube, ns, run_manifest("early"))
    run = wait_run(kube, ns, "early", reason_is("Pending"), operator=operator)
    cond = succeeded(run)
    assert cond is not None and cond["status"] == "Unknown"
    assert "Topology review-pipeline" in cond["message"]
    assert jobs(kube, ns) == []
    apply_examples(kube, ns)
    run = wait_run(kube, ns, "early", finished, timeout=120, operator=operator)
    assert succeeded(run)["reason"] == "Succeeded", debug(kube, ns, operator)  # type: ignore[index]


def test_runner_failure_is_failed_with_its_message(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    ns = examples_ns
    ws = get(kube, ns, "Workspace", "default")
    assert ws is not None
    providers = [
        *ws["spec"]["modelProviders"],
        {
            "name": "dead",
            "type": "openai",
            "baseUrl": "http://127.0.0.1:9/v1",
            "defaultModel": "m",
            "maxRetries": 0,
            "timeoutSeconds": 5,
        },
    ]
    apply(
        kube,
        ns,
        {
            "apiVersion": ws["apiVersion"],
            "kind": "Workspace",
            "metadata": {"name": "default"},
            "spec": {**ws["spec"], "modelProviders": providers},
        },
    )
    apply(kube, ns, agent_with("broken", [], model={"provider": "dead"}))
    wait_ready(kube, ns, "Agent", "broken")
    create(kube, ns, run_manifest("fails", agent="broken"))
    run = wait_run(kube, ns, "fails", finished, operator=operator)
    cond = succeeded(run)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "Failed"), debug(
        kube, ns, operator
    )
    assert cond["message"], "the runner's message is shown"
    assert "127.0.0.1:9" in cond["message"] or "connect" in cond["message"].lower(), cond["message"]


def apply_sleeper(kube: Kube, ns: str) -> None:
    """An agent whose first turn runs `sleep 120`: a run that stays Running until stopped."""
    sleep = {"name": "bash", "arguments": {"command": "sleep 120", "timeout_seconds": 300}}
    apply(kube, ns, agent_with("sleeper", [{"toolCalls": [sleep]}, {"text": "done"}], bash=True))
    wait_ready(kube, ns, "Agent", "sleeper")


def test_timeout_is_timed_out(kube: Kube, examples_ns: str, operator: OperatorProcess) -> None:
    ns = examples_ns
    apply_sleeper(kube, ns)
    create(kube, ns, run_manifest("slow", agent="sleeper", timeout=3))
    run = wait_run(kube, ns, "slow", finished, timeout=60, operator=operator)
    cond = succeeded(run)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "TimedOut"), debug(
        kube, ns, operator
    )


def _running_pod(kube: Kube, ns: str) -> Any:
    def check() -> Any:
        for p in pods(kube, ns):
            if p.status.phase == "Running" and pod_pids(p):
                return p
        return None

    return wait_for(check, 60, message=lambda: debug(kube, ns))


def test_cancel_stops_the_job_and_kills_the_process(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    ns = examples_ns
    apply_sleeper(kube, ns)
    create(kube, ns, run_manifest("to-cancel", agent="sleeper", timeout=300))
    wait_run(kube, ns, "to-cancel", reason_is("Running"), operator=operator)
    pod = _running_pod(kube, ns)
    pids = pod_pids(pod)
    kube.custom.patch_namespaced_custom_object(
        "swarmkit.dev", "v1alpha1", ns, "runs", "to-cancel", {"spec": {"cancelled": True}}
    )
    run = wait_run(kube, ns, "to-cancel", finished, timeout=30, operator=operator)
    cond = succeeded(run)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "Cancelled")
    wait_for(lambda: not any(pid_alive(p) for p in pids), 20, message="the runner process to die")
    wait_for(lambda: jobs(kube, ns) == [], 20, message="the Job to be deleted")


def test_deleting_the_run_kills_the_process(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    ns = examples_ns
    apply_sleeper(kube, ns)
    create(kube, ns, run_manifest("to-delete", agent="sleeper", timeout=300))
    pod = _running_pod(kube, ns)
    pids = pod_pids(pod)
    kube.custom.delete_namespaced_custom_object("swarmkit.dev", "v1alpha1", ns, "runs", "to-delete")
    wait_for(lambda: not any(pid_alive(p) for p in pids), 30, message="the runner process to die")
    wait_for(
        lambda: jobs(kube, ns) == [] and pods(kube, ns) == [],
        30,
        message=lambda: debug(kube, ns, operator),
    )


def test_lost_job_is_recreated_then_fails(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    ns = examples_ns
    apply_sleeper(kube, ns)
    create(kube, ns, run_manifest("lossy", agent="sleeper", timeout=300))
    wait_run(kube, ns, "lossy", reason_is("Running"), operator=operator)
    run = get(kube, ns, "Run", "lossy")
    assert run is not None
    first = run["status"]["jobName"]
    kube.batch.delete_namespaced_job(first, ns, propagation_policy="Background")
    run = wait_run(
        kube,
        ns,
        "lossy",
        lambda r: (r.get("status") or {}).get("jobRecreations") == 1,
        operator=operator,
    )
    second = run["status"]["jobName"]
    assert second == first + "-r1"
    assert not finished(run)
    lost = wait_for(
        lambda: [
            e
            for e in kube.core.list_namespaced_event(
                ns, field_selector=f"involvedObject.uid={run['metadata']['uid']}"
            ).items
            if e.reason == "JobLost"
        ],
        20,
        message="a JobLost Event",
    )
    assert first in lost[0].message and "(1/1)" in lost[0].message
    wait_run(kube, ns, "lossy", reason_is("Running"), operator=operator)
    assert [j.metadata.name for j in jobs(kube, ns) if not j.metadata.deletion_timestamp] == [
        second
    ]
    kube.batch.delete_namespaced_job(second, ns, propagation_policy="Background")
    run = wait_run(kube, ns, "lossy", finished, operator=operator)
    cond = succeeded(run)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "JobLost")
    assert str(MAX_RECREATIONS) in cond["message"]
    wait_for(lambda: pods(kube, ns) == [], 30, message="the lost pods to be gone")


def test_operator_killed_mid_run_same_job_outcome_recorded(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    ns = examples_ns
    apply(
        kube,
        ns,
        agent_with(
            "napper",
            [
                {"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 4"}}]},
                {"text": "rested"},
            ],
            bash=True,
        ),
    )
    wait_ready(kube, ns, "Agent", "napper")
    create(kube, ns, run_manifest("survivor", agent="napper"))
    run = wait_run(kube, ns, "survivor", reason_is("Running"), operator=operator)
    job_name = run["status"]["jobName"]
    operator.kill()
    try:
        # the run finishes while nobody watches
        wait_for(
            lambda: any(p.status.phase == "Succeeded" for p in pods(kube, ns)),
            60,
            message=lambda: debug(kube, ns),
        )
    finally:
        operator.start()
    run = wait_run(kube, ns, "survivor", finished, operator=operator)
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "Succeeded", debug(kube, ns, operator)
    assert run["status"]["output"] == "rested"
    assert [j.metadata.name for j in jobs(kube, ns)] == [job_name]
    assert run["status"].get("jobRecreations", 0) == 0


def test_a_start_record_lost_with_the_lease_is_written_by_the_next_leader(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    # A leader loses its lease right after creating the Run's Job: the status write that
    # records the Job, its bundle and what the Run pinned is refused. The next leader
    # adopts the Job (a predecessor's, its controller ownerReference the Run's) and must
    # write that record from the bundle the Job runs: an EvalRun grades by status.pinned.
    ns = examples_ns
    apply(
        kube,
        ns,
        agent_with(
            "dozer",
            [
                {"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 4"}}]},
                {"text": "rested"},
            ],
            bash=True,
        ),
    )
    wait_ready(kube, ns, "Agent", "dozer")
    create(kube, ns, run_manifest("unrecorded", agent="dozer"))
    run = wait_run(kube, ns, "unrecorded", reason_is("Running"), operator=operator)
    record = {k: run["status"][k] for k in START_RECORD}
    assert record["pinned"]["agents"] == {"dozer": mock.ANY}
    operator.kill()
    try:
        # The Run's status as the refused write left it: no record of the Job at all.
        kube.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, "runs", "unrecorded",
            {"status": {k: None for k in (*START_RECORD, "createdUids")}},
        )  # fmt: skip
        lost = get(kube, ns, "Run", "unrecorded") or {}
        assert not set(lost["status"]) & {*START_RECORD, "createdUids"}
    finally:
        operator.start()
    run = wait_run(kube, ns, "unrecorded", finished, operator=operator)
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "Succeeded", debug(kube, ns, operator)
    assert {k: run["status"][k] for k in START_RECORD} == record
    job = kube.batch.read_namespaced_job(record["jobName"], ns)
    assert run["status"]["createdUids"] == {f"Job/{record['jobName']}": job.metadata.uid}
    assert run["status"]["output"] == "rested"


def test_skill_edited_during_a_run_is_not_seen(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    ns = examples_ns
    skill = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Skill",
        "metadata": {"name": "notes"},
        "spec": {
            "description": "Use to read the notes.",
            "category": "capability",
            "instructions": "Read notes.md.",
            "files": [{"path": "notes.md", "content": "version one"}],
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    }
    apply(kube, ns, skill)
    apply(
        kube,
        ns,
        agent_with(
            "reader",
            [
                {"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 5"}}]},
                {
                    "toolCalls": [
                        {
                            "name": "read_skill_file",
                            "arguments": {"skill_name": "notes", "path": "notes.md"},
                        }
                    ]
                },
                {"text": "read it"},
            ],
            bash=True,
            skills=["notes"],
        ),
    )
    wait_ready(kube, ns, "Agent", "reader")
    # The Agent is Ready on the Skill's render; a Skill created with a few other objects
    # writes its own status up to 0.25 s later (reconcile/parking.FIRST_LOOK_SECONDS).
    wait_ready(kube, ns, "Skill", "notes")
    before = get(kube, ns, "Skill", "notes")["status"]["contentHash"]  # type: ignore[index]
    create(kube, ns, run_manifest("pinned", agent="reader"))
    wait_run(kube, ns, "pinned", reason_is("Running"), operator=operator)
    skill["spec"]["files"][0]["content"] = "version two"
    apply(kube, ns, skill)
    wait_for(lambda: get(kube, ns, "Skill", "notes")["status"]["contentHash"] != before, 30)  # type: ignore[index]
    run = wait_run(kube, ns, "pinned", finished, operator=operator)
    assert succeeded(run)["reason"] == "Succeeded", debug(kube, ns, operator)  # type: ignore[index]
    assert run["status"]["pinned"]["skills"]["notes"] == before
    pod_name = run["status"]["podName"]
    logs = kube.core.read_namespaced_pod_log(pod_name, ns) if pod_name else ""
    assert "version one" in logs or "version one" in str(run["status"]), logs[-2000:]
    assert "version two" not in logs


def test_a_run_created_right_after_its_agents_missing_skill_runs_with_it(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    """An Agent granting a Skill that does not exist yet is Ready without it (inert until
    it appears). The user then applies the Skill and at once a Run: the Run waits for the
    Agent to pick the Skill up instead of starting on the render that went without it."""
    ns = examples_ns
    load = {"toolCalls": [{"name": "load_skill", "arguments": {"name": "late-notes"}}]}
    apply(kube, ns, agent_with("late-reader", [load, {"text": "loaded"}], skills=["late-notes"]))
    wait_ready(kube, ns, "Agent", "late-reader")
    assert get(kube, ns, "Agent", "late-reader")["status"]["missingSkills"] == ["late-notes"]  # type: ignore[index]
    spec = {
        "description": "Use to read the late notes.",
        "category": "capability",
        "instructions": "The notes came late.",
        "provenance": {"authoredBy": "human", "version": "1.0.0"},
    }
    apply(kube, ns, doc("Skill", "late-notes", spec))
    create(kube, ns, run_manifest("late", agent="late-reader"))
    run = wait_run(kube, ns, "late", finished, operator=operator)
    assert succeeded(run)["reason"] == "Succeeded", debug(kube, ns, operator)  # type: ignore[index]
    [usage] = run["status"]["skills"]
    assert usage["loaded"] == ["late-notes"], run["status"]
    content_hash = get(kube, ns, "Skill", "late-notes")["status"]["contentHash"]  # type: ignore[index]
    assert run["status"]["pinned"]["skills"] == {"late-notes": content_hash}


def test_output_over_4kib_is_truncated_with_marker(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    ns = examples_ns
    apply(kube, ns, agent_with("talker", [{"text": "word " * 3000}]))
    wait_ready(kube, ns, "Agent", "talker")
    create(kube, ns, run_manifest("long", agent="talker"))
    run = wait_run(kube, ns, "long", finished, operator=operator)
    status = run["status"]
    assert succeeded(run)["reason"] == "Succeeded", debug(kube, ns, operator)  # type: ignore[index]
    assert status["outputTruncated"] is True
    assert status["output"].endswith(TRUNCATION_MARKER)
    assert len(status["output"].encode()) <= 4096


def test_input_of_250000_non_ascii_characters_runs(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    # Issue 47.8: inside the CRD's limits (262,144 characters, 524,288 bytes of UTF-8), 500 KB
    # of 'é' used to become 1.5 MB of \u00e9 in the bundle and fail at start.
    ns = examples_ns
    text = "é" * 250_000
    create(kube, ns, run_manifest("accents", input=text))
    run = wait_run(kube, ns, "accents", finished, operator=operator)
    assert succeeded(run)["reason"] == "Succeeded", debug(kube, ns, operator)  # type: ignore[index]
    bundle = kube.core.read_namespaced_config_map(run["status"]["bundleConfigMap"], ns)
    assert json.loads(bundle.data["bundle.json"])["run"]["input"] == text


def _with_runtime(kube: Kube, ns: str, **runtime: Any) -> None:
    ws = get(kube, ns, "Workspace", "default")
    assert ws is not None
    spec = {**ws["spec"], "runtime": {**ws["spec"].get("runtime", {}), **runtime}}
    apply(
        kube,
        ns,
        {
            "apiVersion": ws["apiVersion"],
            "kind": "Workspace",
            "metadata": {"name": "default"},
            "spec": spec,
        },
    )
    # The edit is in effect once the Workspace's new generation is reconciled and the
    # topology that runs in it is Ready again.
    wait_for(
        lambda: get(kube, ns, "Workspace", "default")["status"]["observedGeneration"] >= 2,  # type: ignore[index]
        30,
    )
    wait_ready(kube, ns, "Topology", "review-pipeline")


def test_unpullable_image_is_image_pull_failed(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    ns = examples_ns
    _with_runtime(kube, ns, image="registry.invalid/no-such-runtime:1")
    create(kube, ns, run_manifest("no-image"))
    run = wait_run(kube, ns, "no-image", finished, timeout=60, operator=operator)
    cond = succeeded(run)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "ImagePullFailed")
    assert "registry.invalid/no-such-runtime" in cond["message"] or "image" in cond["message"]
    wait_for(lambda: jobs(kube, ns) == [], 30, message="the stuck Job to be deleted")


def test_pod_that_cannot_be_created_is_pod_creation_failed(
    kube: Kube, examples_ns: str, operator: OperatorProcess
) -> None:
    ns = examples_ns
    _with_runtime(kube, ns, serviceAccountName="no-such-account")
    create(kube, ns, run_manifest("no-pod"))
    run = wait_run(kube, ns, "no-pod", finished, timeout=60, operator=operator)
    cond = succeeded(run)
    assert cond is not None and (cond["status"], cond["reason"]) == (
        "False",
        "PodCreationFailed",
    ), debug(kube, ns, operator)
    assert "no-such-account" in cond["message"]
