"""Bounded memory, exact counts (issue 37 item 5).

* The leader forgets a Run's per-Run state once the Run is final, and all of it once the
  Run is gone: 2,000 Runs created, left waiting for their target, cancelled (final) and
  deleted leave no per-Run entry, through the real reconcile path (the Runs controller's
  workers over in-memory indexes, the API writes recorded).
* Every metric is counted once, after the write it describes: a status write that fails
  and is retried counts the Run's spend and tokens once; a Job that could not be created
  counts no funnel transition (the transition is counted by the write that records it).
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from swarmkit_api.bundle import RunResult
from swarmkit_api.run import TokenUsage
from swarmkit_operator import k8s
from swarmkit_operator.builders import run_status as rs
from swarmkit_operator.config import OperatorConfig, RunsSettings
from swarmkit_operator.runs import Indexes, RunController, funnel_gate, status
from swarmkit_operator.runs.summaries import run_summary

NS = "bounded"


def run_body(uid: str, spec: dict[str, Any], status_: dict[str, Any] | None = None) -> Any:
    meta = {"name": f"r-{uid}", "namespace": NS, "uid": uid, "generation": 1}
    meta["resourceVersion"] = "5"
    return run_summary({"metadata": meta, "spec": spec, "status": dict(status_ or {})})


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    seen: list[tuple[str, dict[str, Any]]] = []
    version = [100]

    async def patch_status(
        plural: str, ns: str, name: str, patch: dict[str, Any], manager: str
    ) -> str:
        version[0] += 1
        seen.append((name, patch))
        return str(version[0])

    async def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    monkeypatch.setattr(k8s, "patch_status", patch_status)
    monkeypatch.setattr(k8s, "post_event", nothing)
    monkeypatch.setattr(k8s, "remove_pod_finalizer", nothing)
    monkeypatch.setattr(k8s, "label_config_map", nothing)
    return seen


async def _work(ctl: RunController, uid: str) -> None:
    """A watch event's kick of ``uid`` and one worker's pass on it (the queue's other keys,
    the rechecks each waiting Run asked for, are not taken here)."""
    ctl.kick(uid)
    await ctl._workers.process(uid)


def per_run(state: Any) -> dict[str, int]:
    """How many Runs each per-Run memory of the state holds (what ``forget`` bounds)."""
    return {
        "overlay": len(state.overlay),
        "created_jobs": len(state.created_jobs),
        "waiting": sum(len(uids) for uids in state.waiting.values()),
        "start_attempts": len(state.start_attempts),
        "milestones": len(state.milestones),
        "made": len(state.resolver.ledger),
    }


async def test_2000_runs_created_finished_and_deleted_leave_no_per_run_state(
    writes: list[tuple[str, dict[str, Any]]],
) -> None:
    runs: dict[str, list[Any]] = {}
    indexes = Indexes(
        runs=runs, jobs={}, pods={}, topologies={}, agents={}, skills={}, workspaces={}
    )
    # Milestones on: the most each Run can leave behind.
    ctl = RunController(OperatorConfig(), indexes, settings=RunsSettings(trace=True))
    uids = [f"u-{i}" for i in range(2000)]
    spec = {"agentRef": {"name": "not-yet"}, "input": "x"}
    for uid in uids:  # created: each waits for its Agent
        runs[uid] = [run_body(uid, spec)]
        await _work(ctl, uid)
    held = per_run(ctl.state)
    assert held["waiting"] == 2000 and held["milestones"] == 2000 and held["overlay"] == 2000
    for uid in uids:  # cancelled: final
        runs[uid] = [run_body(uid, {**spec, "cancelled": True})]
        await _work(ctl, uid)
    final = [p for _, p in writes if p.get("conditions", [{}])[0].get("reason") == "Cancelled"]
    assert len(final) == 2000
    # Final: only the overlays are left (each bridges the index's lag behind the final
    # write; the index here never shows it, so they stay until the Runs go).
    assert per_run(ctl.state) == {
        "overlay": 2000,
        "created_jobs": 0,
        "waiting": 0,
        "start_attempts": 0,
        "milestones": 0,
        "made": 0,
    }
    for uid in uids:  # deleted: the DELETED event's kick finds it gone
        del runs[uid]
        await _work(ctl, uid)
    assert per_run(ctl.state) == {
        "overlay": 0,
        "created_jobs": 0,
        "waiting": 0,
        "start_attempts": 0,
        "milestones": 0,
        "made": 0,
    }
    assert not ctl.state.changed
    assert all(ctl.queue.failures(uid) == 0 for uid in uids)


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_status_write_that_fails_and_is_retried_counts_spend_and_tokens_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns = "counted-once"
    usage = TokenUsage.model_validate(
        {"inputTokens": 100, "outputTokens": 10, "models": [
            {"agent": "lead", "provider": "p", "model": "m", "inputTokens": 100,
             "outputTokens": 10, "cost": "0.5", "currency": "USD"}]}
    )  # fmt: skip
    verdict = rs.Verdict(
        phase="Finished",
        status="True",
        reason="Succeeded",
        message="done",
        result=RunResult(outcome="Succeeded", usage=usage),
    )
    attempts: list[dict[str, Any]] = []

    async def patch_status(
        plural: str, namespace: str, name: str, patch: dict[str, Any], manager: str
    ) -> str:
        attempts.append(patch)
        if len(attempts) == 1:
            raise k8s.ApiError(500, "PATCH", "/runs/r", "the apiserver went away")
        return "7"

    async def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    monkeypatch.setattr(k8s, "patch_status", patch_status)
    monkeypatch.setattr(k8s, "post_event", nothing)
    runs = {"u": [run_summary({"metadata": {"name": "r", "namespace": ns, "uid": "u",
                                            "generation": 1, "resourceVersion": "5"},
                               "spec": {"agentRef": {"name": "a"}}, "status": {}})]}  # fmt: skip
    ctl = RunController(
        OperatorConfig(),
        Indexes(runs=runs, jobs={}, pods={}, topologies={}, agents={}, skills={}, workspaces={}),
    )
    tokens = {"namespace": ns, "agent": "lead", "model": "m"}
    with pytest.raises(k8s.ApiError):
        view = ctl.run_view("u")
        assert view is not None
        await status.write(ctl.state, view, verdict)
    # The write failed: nothing counted yet.
    assert _value("swarmkit_spend_total", **tokens, currency="USD") == 0
    assert _value("swarmkit_model_tokens_total", **tokens, type="output") == 0
    # The retry (the queue's) reads the same Run again: counted once, now.
    view = ctl.run_view("u")
    assert view is not None
    await status.write(ctl.state, view, verdict)
    assert len(attempts) == 2
    assert _value("swarmkit_spend_total", **tokens, currency="USD") == 0.5
    assert _value("swarmkit_model_tokens_total", **tokens, type="output") == 10
    assert _value("swarmkit_model_tokens_total", **tokens, type="input") == 100
    # A later reconcile reads the final Run (the overlay): nothing counted again.
    view = ctl.run_view("u")
    assert view is not None
    await status.write(ctl.state, view, verdict)
    assert _value("swarmkit_spend_total", **tokens, currency="USD") == 0.5


def _approval(name: str, namespace: str) -> dict[str, Any]:
    report = {"funnel": "counted", "artifact": "x", "attempts": 1, "retries": 0}
    gate = {
        "funnel": "counted",
        "approve": {"rules": [{"roles": ["l"], "quorum": "any"}], "roles": {"l": {"users": ["a"]}}},
        "author": "carol",
        "report": report,
    }
    request = {"kind": "funnel_approval", "question": "?", "key": "e.0.1", "gate": gate}
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"request": request}}


async def test_a_failed_job_creation_counts_no_funnel_transition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A resume writes the settled gate with the resumed Job (``create_job`` then its
    status write): when the Job cannot be created, nothing is written and nothing is
    counted; the retry's write counts the transition once."""
    ns = "gates-once"
    review = _approval("r-gate", ns)
    opened = funnel_gate.gates_after([], review, None)
    assert opened is not None
    settled = funnel_gate.gates_after(opened, review, "approve")
    assert settled is not None

    def approved() -> float:
        return _value(
            "swarmkit_funnel_gates_total", namespace=ns, funnel="counted", state="Approved"
        )

    assert approved() == 0  # computing the gates counts nothing
    before = approved()

    async def create_fails(*args: Any, **kwargs: Any) -> None:
        raise k8s.ApiError(500, "POST", "/jobs", "quota")

    async def patch_status(*args: Any, **kwargs: Any) -> str:
        return "9"

    async def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    monkeypatch.setattr(k8s, "patch_status", patch_status)
    monkeypatch.setattr(k8s, "post_event", nothing)
    runs = {"u": [run_summary({"metadata": {"name": "r", "namespace": ns, "uid": "u",
                                            "generation": 1, "resourceVersion": "5"},
                               "spec": {"agentRef": {"name": "a"}},
                               "status": {"gates": opened}})]}  # fmt: skip
    ctl = RunController(
        OperatorConfig(),
        Indexes(
            runs=runs, jobs={}, pods={}, topologies={}, agents={}, skills={}, workspaces={},
            reviews={"u": [review]},
        ),
    )  # fmt: skip

    async def resume_job() -> None:
        # What runs/review.resume does: create the Job, then write its status with the gate.
        await create_fails()
        view = ctl.run_view("u")
        assert view is not None
        await status.write(ctl.state, view, rs.pending("resumed"), {"gates": settled})

    with pytest.raises(k8s.ApiError):
        await resume_job()
    assert approved() == before
    view = ctl.run_view("u")
    assert view is not None
    await status.write(ctl.state, view, rs.pending("resumed"), {"gates": settled})
    assert approved() == before + 1
    view = ctl.run_view("u")  # the next reconcile reads the gate as written
    assert view is not None
    await status.write(ctl.state, view, rs.pending("resumed again"), {"gates": settled})
    assert approved() == before + 1
