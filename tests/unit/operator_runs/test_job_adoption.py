"""A Run's Job is adopted only with proof the operator created it (issue 46, item 1).

An editor (built-in ``edit``) creates Jobs, and may copy a Run's uid into a controller
ownerReference of her own. What only the operator writes is the Run's status: the uid of
every object it creates for the Run goes to ``status.createdUids`` right after the create.
The Runs controller's reconcile runs here over the in-memory API (:mod:`tests.support.fake_k8s`),
its indexes filled from what the fake stores; the target's resolution is the examples'
bundle (``fixtures.example_bundle``), so every API object of the start is real.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swarmkit_api.conditions import REASON_TAMPERED_OBJECT
from swarmkit_operator.builders import job as jobs
from swarmkit_operator.builders import trust
from swarmkit_operator.builders.workload import Target, owner_reference
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.runs import Indexes, RunController, start
from swarmkit_operator.runs.observe import reconcile
from swarmkit_operator.runs.summaries import job_summary, pod_summary, run_summary
from swarmkit_operator.workload import pipeline
from swarmkit_operator.workload.resolve import Resolved
from tests.support.fake_k8s import FakeApi, fake_api

from .fixtures import example_bundle

NS = "team-a"


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    fake = fake_api(monkeypatch)
    _, rendered = example_bundle(workspace_patch={"egress": {"policy": "none"}})

    async def resolved(*_: Any) -> Resolved:
        return Resolved(rendered)

    async def no_refusal(*_: Any, **__: Any) -> None:
        return None

    monkeypatch.setattr(pipeline, "resolve", resolved)
    monkeypatch.setattr(pipeline, "refusals", no_refusal)
    return fake


def create_run(api: FakeApi, name: str = "r", **spec: Any) -> dict[str, Any]:
    return api.create(
        {
            "apiVersion": "swarmkit.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"agentRef": {"name": "a"}, "input": "x", **spec},
        }
    )


def controller(api: FakeApi, leading_since: datetime | None = None) -> RunController:
    indexes = Indexes(
        runs={},
        jobs={},
        pods={},
        topologies={},
        agents={},
        skills={},
        workspaces={},
        spend_quotas={},
    )
    ctl = RunController(OperatorConfig(), indexes)
    ctl.state.resolver.ledger.since = leading_since or datetime.now(UTC) - timedelta(hours=1)
    return ctl


def sync(api: FakeApi, ctl: RunController) -> None:
    """The indexes as the watches would show the fake's objects now."""
    idx = ctl.state.idx
    for index in (idx.runs, idx.jobs, idx.pods):
        assert isinstance(index, dict)
        index.clear()
    for run in api.list("Run", NS):
        idx.runs[run["metadata"]["uid"]] = [run_summary(run)]  # type: ignore[index]
    for kind, summary, index in (("Job", job_summary, idx.jobs), ("Pod", pod_summary, idx.pods)):
        for obj in api.list(kind, NS):
            labels = obj["metadata"].get("labels") or {}
            if jobs.RUN_UID_LABEL in labels:
                index.setdefault(labels[jobs.RUN_UID_LABEL], []).append(summary(obj))  # type: ignore[union-attr]


async def posted(ctl: RunController) -> None:
    """Wait for what the reconcile posts in the background (its Events)."""
    for _ in range(100):
        if not ctl.state._background:
            return
        await asyncio.sleep(0.01)


def succeeded(api: FakeApi, name: str = "r") -> dict[str, Any]:
    return api.condition("Run", NS, name, "Succeeded") or {}


def forged_job(run: dict[str, Any], labelled: bool = True) -> dict[str, Any]:
    """eve's Job under the Run's Job name, its ownerReference copied from the Run."""
    meta = run["metadata"]
    target = Target("Run", NS, meta["name"], meta["uid"], meta["name"])
    labels = {jobs.RUN_UID_LABEL: jobs.label_value(meta["uid"])} if labelled else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": jobs.job_name(meta["name"], meta["uid"]),
            "namespace": NS,
            "labels": labels,
            "ownerReferences": [owner_reference(target)],
        },
        "spec": {"template": {"spec": {"containers": [{"name": "eve", "image": "eve:1"}]}}},
    }


async def predecessor_started(api: FakeApi, run: dict[str, Any]) -> dict[str, Any]:
    """A predecessor's start of ``run`` that lost its lease right after creating the Job:
    its bundle and its Job exist, the status write that records them was refused."""
    meta = run["metadata"]
    ctl = controller(api)
    sync(api, ctl)
    api.refuse("PATCH", rf"/runs/{meta['name']}/status$")
    with pytest.raises(Exception, match="refused"):
        await reconcile(ctl.state, meta["uid"])
    job = api.get("Job", NS, jobs.job_name(meta["name"], meta["uid"]))
    assert job is not None
    assert "jobName" not in ((api.get("Run", NS, meta["name"]) or {}).get("status") or {})
    return job


async def test_the_operators_job_is_recorded_and_adopted_on_every_later_pass(api: FakeApi) -> None:
    run = create_run(api)
    uid = run["metadata"]["uid"]
    ctl = controller(api)
    sync(api, ctl)
    await reconcile(ctl.state, uid)
    name = jobs.job_name("r", uid)
    job = api.get("Job", NS, name)
    assert job is not None
    status = api.get("Run", NS, "r")["status"]  # type: ignore[index]
    assert status["createdUids"] == {f"Job/{name}": job["metadata"]["uid"]}
    # A new process (nothing remembered) that started leading after the Job was made:
    # the record in the Run's status is the proof.
    later = controller(api, leading_since=datetime.now(UTC) + timedelta(seconds=5))
    sync(api, later)
    await reconcile(later.state, uid)
    assert succeeded(api).get("reason") != REASON_TAMPERED_OBJECT


async def test_a_job_with_a_copied_owner_reference_fails_the_run_and_is_left_alone(
    api: FakeApi,
) -> None:
    run = create_run(api)
    uid = run["metadata"]["uid"]
    forged = api.create(forged_job(run))
    ctl = controller(api)
    sync(api, ctl)  # the Jobs index shows eve's Job under the Run's Job name
    await reconcile(ctl.state, uid)
    cond = succeeded(api)
    assert (cond.get("status"), cond.get("reason")) == ("False", REASON_TAMPERED_OBJECT)
    assert f"Job {forged['metadata']['name']}" in cond["message"]
    assert "no record of creating it" in cond["message"]
    assert api.get("Job", NS, forged["metadata"]["name"]) == forged  # not used, not changed
    assert api.list("Job", NS) == [forged]
    await posted(ctl)
    assert any(e["reason"] == REASON_TAMPERED_OBJECT for e in api.list("Event", NS))


async def test_an_unindexed_forged_job_is_refused_when_the_start_finds_it(api: FakeApi) -> None:
    # Without the Run's label the Jobs index does not show it: the start's create answers
    # AlreadyExists and the Job found under that name is not the operator's.
    run = create_run(api)
    forged = api.create(forged_job(run, labelled=False))
    ctl = controller(api)
    sync(api, ctl)
    await reconcile(ctl.state, run["metadata"]["uid"])
    cond = succeeded(api)
    assert cond.get("reason") == REASON_TAMPERED_OBJECT, cond
    assert forged["metadata"]["name"] in cond["message"]
    assert api.get("Job", NS, forged["metadata"]["name"]) == forged


async def test_a_job_replaced_under_its_recorded_name_is_refused(api: FakeApi) -> None:
    run = create_run(api)
    uid = run["metadata"]["uid"]
    ctl = controller(api)
    sync(api, ctl)
    await reconcile(ctl.state, uid)
    name = jobs.job_name("r", uid)
    recorded = api.get("Job", NS, name)["metadata"]["uid"]  # type: ignore[index]
    api.delete("Job", NS, name)
    api.create(forged_job(run))  # eve re-creates it: same name, same owner, another uid
    sync(api, ctl)
    await reconcile(ctl.state, uid)
    cond = succeeded(api)
    assert cond.get("reason") == REASON_TAMPERED_OBJECT, cond
    assert f"not the {recorded} recorded" in cond["message"]


async def test_a_failed_record_write_is_retried_and_the_job_stays_the_operators(
    api: FakeApi,
) -> None:
    run = create_run(api)
    uid = run["metadata"]["uid"]
    ctl = controller(api, leading_since=datetime.now(UTC) - timedelta(seconds=1))
    sync(api, ctl)
    api.refuse("PATCH", r"/runs/r/status$")
    with pytest.raises(Exception, match="refused"):
        await reconcile(ctl.state, uid)
    name = jobs.job_name("r", uid)
    job = api.get("Job", NS, name)
    assert job is not None and "createdUids" not in (api.get("Run", NS, "r") or {}).get(
        "status", {}
    )
    sync(api, ctl)  # the queue's retry: the Job is indexed, its record still missing
    await reconcile(ctl.state, uid)
    assert succeeded(api).get("reason") != REASON_TAMPERED_OBJECT
    status = api.get("Run", NS, "r")["status"]  # type: ignore[index]
    assert status["createdUids"] == {f"Job/{name}": job["metadata"]["uid"]}


async def test_a_predecessors_unrecorded_job_is_adopted_but_not_one_made_before_start_after(
    api: FakeApi,
) -> None:
    # The operator stopped between its create and its record: the Job (its ownerReference
    # the Run's) was made before this process started leading, after the Run could start.
    run = create_run(api)
    job = await predecessor_started(api, run)
    ctl = controller(api, leading_since=datetime.now(UTC) + timedelta(seconds=2))
    sync(api, ctl)
    await reconcile(ctl.state, run["metadata"]["uid"])
    assert succeeded(api).get("reason") != REASON_TAMPERED_OBJECT
    recorded = api.get("Run", NS, "r")["status"]["createdUids"]  # type: ignore[index]
    assert recorded == {f"Job/{job['metadata']['name']}": job["metadata"]["uid"]}
    # A delayed Run's Job made before its startAfter is never the operator's.
    when = (datetime.now(UTC) + timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    early = create_run(api, "later", startAfter=when)
    forged = api.create(forged_job(early))
    sync(api, ctl)
    view = ctl.state.run_view(early["metadata"]["uid"])
    assert view is not None
    target = Target("Run", NS, "later", early["metadata"]["uid"], "later")
    with pytest.raises(trust.Refused, match="before the operator could make it"):
        trust.check_made("Job", forged, target, start.proof(ctl.state, view))


def status_of(api: FakeApi, name: str = "r") -> dict[str, Any]:
    return dict((api.get("Run", NS, name) or {}).get("status") or {})


async def test_a_predecessors_job_gets_the_start_record_of_the_bundle_it_runs(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The benchmark's defect: the next leader saw the Job as started and never wrote
    # pinned nor the bundle fields; the Run ended Succeeded without status.pinned.
    run = create_run(api)
    uid = run["metadata"]["uid"]
    job = await predecessor_started(api, run)
    bundle = api.get("ConfigMap", NS, jobs.bundle_config_map_name("r", uid))
    assert bundle is not None

    async def no_render(*_: Any) -> Resolved:
        raise AssertionError("the record must be the Job's bundle, not a render of today's specs")

    monkeypatch.setattr(pipeline, "resolve", no_render)
    ctl = controller(api, leading_since=datetime.now(UTC) + timedelta(seconds=2))
    sync(api, ctl)
    await reconcile(ctl.state, uid)
    status = status_of(api)
    assert succeeded(api).get("status") == "Unknown", succeeded(api)
    assert status["jobName"] == job["metadata"]["name"]
    assert status["bundleConfigMap"] == bundle["metadata"]["name"]
    assert status["bundleSha256"] == trust.data_digest(bundle["data"])
    pinned = example_bundle(workspace_patch={"egress": {"policy": "none"}})[1].pinned.wire()
    assert pinned["agents"] and status["pinned"] == pinned
    assert status["createdUids"] == {f"Job/{job['metadata']['name']}": job["metadata"]["uid"]}
    # The record proves the bundle from now on: the check of a recreation passes.
    trust.check("the run's bundle", bundle["metadata"]["name"], bundle, status["bundleSha256"])


async def test_a_bundle_that_is_not_the_one_the_predecessors_job_runs_is_refused(
    api: FakeApi,
) -> None:
    run = create_run(api)
    uid = run["metadata"]["uid"]
    await predecessor_started(api, run)
    # eve replaces the bundle (deleted, made again under its name) before the next leader.
    name = jobs.bundle_config_map_name("r", uid)
    bundle = api.get("ConfigMap", NS, name)
    assert bundle is not None
    api.delete("ConfigMap", NS, name)
    data = dict(bundle["data"])
    forged = json.loads(data["bundle.json"])
    forged["run"]["input"] = "eve's instructions"
    data["bundle.json"] = json.dumps(forged)
    api.create({**bundle, "metadata": {"name": name, "namespace": NS}, "data": data})
    ctl = controller(api, leading_since=datetime.now(UTC) + timedelta(seconds=2))
    sync(api, ctl)
    await reconcile(ctl.state, uid)
    cond = succeeded(api)
    assert (cond.get("status"), cond.get("reason")) == ("False", REASON_TAMPERED_OBJECT), cond
    assert f"ConfigMap {name}" in cond["message"]
    assert "the Job's" in cond["message"]
    status = status_of(api)
    assert "pinned" not in status and "bundleSha256" not in status and "jobName" not in status
