"""The API writes one Run costs the operator: a pod that starts as expected is not worth a
status write of its own, and a finished Run's bundle is labelled finished once, however
often the finished Run is reconciled before the bundles index shows the label.

The Runs controller's reconcile on in-memory indexes, with the API writes recorded.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swarmkit_api.bundle import RunResult
from swarmkit_api.effects import Effect, outbox_line
from swarmkit_operator import k8s
from swarmkit_operator.builders import job as jobs
from swarmkit_operator.builders import run_status as rs
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.runs import Indexes, RunController, effects
from swarmkit_operator.runs.observe import reconcile
from swarmkit_operator.runs.summaries import job_summary, pod_summary, run_summary

UID = "u-1"
JOB = jobs.job_name("r", UID, 0, 0)
BUNDLE = jobs.bundle_config_map_name("r", UID)


def ts(seconds_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def run(status: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": "r", "namespace": "ns", "uid": UID, "generation": 1, "resourceVersion": "5"}
    return run_summary({"metadata": meta, "spec": {"agentRef": {"name": "a"}}, "status": status})


def started_status() -> dict[str, Any]:
    return {
        "jobName": JOB,
        "bundleConfigMap": BUNDLE,
        "createdUids": {f"Job/{JOB}": "j-1"},  # what proves the Job the operator's
        "conditions": [
            {
                "type": "Succeeded",
                "status": "Unknown",
                "reason": "Pending",
                "message": f"waiting for Job {JOB} to create its pod",
            }
        ],
    }


def pending_pod(age: float) -> dict[str, Any]:
    return pod_summary(
        {
            "metadata": {
                "name": f"{JOB}-p1",
                "namespace": "ns",
                "uid": "p-1",
                "labels": {"batch.kubernetes.io/job-name": JOB},
                "ownerReferences": [{"kind": "Job", "uid": "j-1", "controller": True}],
                "creationTimestamp": ts(age),
            },
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {"name": "runner", "state": {"waiting": {"reason": "ContainerCreating"}}}
                ],
            },
        }
    )


def controller(status: dict[str, Any], pods: list[dict[str, Any]], **extra: Any) -> RunController:
    job = job_summary({"metadata": {"name": JOB, "uid": "j-1", "creationTimestamp": ts(3)}})
    indexes = Indexes(
        runs={UID: [run(status)]},
        jobs={UID: [job]},
        pods={UID: pods},
        topologies={},
        agents={},
        skills={},
        workspaces={},
        **extra,
    )
    return RunController(OperatorConfig(), indexes)


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []

    async def patch_status(
        plural: str, ns: str, name: str, patch: dict[str, Any], manager: str
    ) -> str:
        assert manager == k8s.RUNS_MANAGER  # the Runs controller is a Run's one writer
        seen.append(("status", patch))
        return "6"

    async def label(ns: str, name: str, labels: dict[str, str]) -> bool:
        await asyncio.sleep(0)
        seen.append(("label", name))
        return True

    async def nothing(*args: Any, **kwargs: Any) -> None:
        seen.append(("other", args))

    monkeypatch.setattr(k8s, "patch_status", patch_status)
    monkeypatch.setattr(k8s, "label_config_map", label)
    monkeypatch.setattr(k8s, "post_event", nothing)
    monkeypatch.setattr(k8s, "remove_pod_finalizer", nothing)
    monkeypatch.setattr(k8s, "object_events", no_events)
    return seen


async def no_events(namespace: str, uid: str) -> list[dict[str, Any]]:
    return []


async def test_a_pod_just_created_and_starting_costs_no_status_write(
    writes: list[tuple[str, Any]],
) -> None:
    ctl = controller(started_status(), [pending_pod(age=0)])
    again = await reconcile(ctl.state, UID)
    assert writes == []
    assert again is not None and 0 < again <= 2.0  # looked at again without an event


async def test_a_pod_still_pending_after_the_quiet_time_is_reported(
    writes: list[tuple[str, Any]],
) -> None:
    ctl = controller(started_status(), [pending_pod(age=5)])
    await reconcile(ctl.state, UID)
    assert len(writes) == 1 and writes[0][0] == "status"
    condition = writes[0][1]["conditions"][0]
    assert condition["message"] == f"waiting for pod {JOB}-p1 to start"
    assert writes[0][1]["podName"] == f"{JOB}-p1"


async def test_a_finished_runs_bundle_is_labelled_once_while_the_index_lags(
    writes: list[tuple[str, Any]],
) -> None:
    final = started_status()
    final["conditions"] = [{"type": "Succeeded", "status": "True", "reason": "Succeeded"}]
    bundles = {"ns": [{"bundle": BUNDLE, "finished": False}]}  # the label not seen yet
    ctl = controller(final, [], bundles=bundles)
    for _ in range(3):  # reconciles of the finished Run before the index catches up
        await reconcile(ctl.state, UID)
        await asyncio.sleep(0.01)
    assert writes == [("label", BUNDLE)]
    # A new operator process (nothing remembered) repairs a label a crash skipped.
    fresh = controller(final, [], bundles=bundles)
    await reconcile(fresh.state, UID)
    assert writes == [("label", BUNDLE), ("label", BUNDLE)]


async def test_a_pod_stuck_on_a_mount_says_so_and_a_missing_pin_fails_at_once(
    writes: list[tuple[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 47: the kubelet's FailedMount reaches the Run's condition within seconds; a
    ConfigMap the pod mounts that is gone fails the run PinnedRevisionMissing, naming it
    (never the run's timeout)."""
    message = 'MountVolume.SetUp failed for volume "skill-0" : configmap "skill-d-1a2b" not found'

    async def events(namespace: str, uid: str) -> list[dict[str, Any]]:
        assert uid == "p-1"
        return [{"reason": "FailedMount", "message": message}]

    present: dict[str, Any] = {"skill-d-1a2b": {"data": {}}}

    async def read_config_map(namespace: str, name: str) -> dict[str, Any] | None:
        return present.get(name)

    monkeypatch.setattr(k8s, "object_events", events)
    monkeypatch.setattr(k8s, "read_config_map", read_config_map)
    ctl = controller(started_status(), [pending_pod(age=5)])
    again = await reconcile(ctl.state, UID)
    condition = writes[-1][1]["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("Unknown", "Pending")
    assert condition["message"] == f"pod {JOB}-p1 cannot start: FailedMount: {message}"
    assert again is not None and again <= 5.0  # looked at again while it waits

    present.clear()  # gone for good
    ctl = controller(started_status(), [pending_pod(age=5)])
    await reconcile(ctl.state, UID)
    condition = writes[-1][1]["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "PinnedRevisionMissing")
    assert "skill-d-1a2b" in condition["message"]


async def test_a_stages_effects_are_written_by_the_one_run_status_writer(
    writes: list[tuple[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``status.effects`` goes through the Runs' one status writer like every other field:
    remembered as the Run's overlay, so the next reconcile (the index still behind) sees the
    effects recorded and writes nothing again."""
    line, sha = outbox_line([Effect(seq=0, kind="agent_message", agent="a", to="b", message="hi")])
    created: list[str] = []

    async def pod_log(namespace: str, pod: str, container: str) -> str:
        return f"some output\n{line}\n"

    async def create(plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any] | None:
        if body["metadata"]["name"] in created:
            return None  # an earlier attempt created it
        created.append(body["metadata"]["name"])
        return dict(body)

    monkeypatch.setattr(k8s, "read_pod_log", pod_log)
    monkeypatch.setattr(k8s, "create_custom_if_absent", create)
    st = controller(started_status(), []).state
    result = RunResult(outcome="Succeeded", outbox_sha256=sha)
    verdict = rs.Verdict("Finished", "True", "Succeeded", pod_name=f"{JOB}-p1", result=result)
    view = st.run_view(UID)
    assert view is not None
    await effects.settle(st, view, verdict)

    again = st.run_view(UID)  # the index still shows the Run without effects
    assert again is not None
    [entry] = again.status["effects"]
    assert (entry["state"], entry["object"]) == ("Materialized", f"Run/{created[0]}")
    await effects.settle(st, again, verdict)
    assert [w for w in writes if w[0] == "status"] == [("status", {"effects": [entry]})]
