"""The operator's spans of a finished Run, exported to a real Jaeger and read back.

:class:`~swarmkit_operator.runs.tracing.RunSpans` builds them after the fact from the
milestones the Runs controller recorded; here the milestones are given, so the span tree,
the Run's fixed ids and the scheduled Run's link to its schedule are checked without a
cluster (``tests/integration/test_runs_tracing.py`` checks them with one).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from swarmkit_api.tracing import root_span_id, trace_id_for
from swarmkit_devcluster.jaeger import Jaeger
from swarmkit_operator.runs import schedule
from swarmkit_operator.runs import tracing as run_tracing
from swarmkit_operator.runs.model import RunView
from tests.support.tracing import one, views

UID = "3f1c9a52-7d4e-4b1a-9c2e-5a6b7c8d9e0f"


@pytest.fixture(scope="module")
def jaeger() -> Iterator[Jaeger]:
    with Jaeger() as server:
        yield server


def _run(labels: dict[str, str], uid: str = UID) -> RunView:
    return RunView(
        name="nightly",
        namespace="team-a",
        uid=uid,
        generation=1,
        spec={},
        status={"traceId": trace_id_for(uid), "jobName": "run-nightly-3f1c9", "resumes": 0},
        labels=labels,
        deleting=False,
        resource_version=7,
    )


def _export(jaeger: Jaeger, run: RunView, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", jaeger.otlp_http_endpoint)
    now = time.monotonic()
    marks = {
        "reconcile_start": now - 3.0,
        "resolved": now - 2.9,
        "bundle_created": now - 2.7,
        "job_created": now - 2.6,
        "pod_done_seen": now - 0.2,
        "condition_final": now - 0.1,
    }
    spans = run_tracing.RunSpans(os.environ)
    assert spans.export(run, "Succeeded", "True", marks, now)
    spans.flush()


def test_the_operator_spans_of_a_run_under_its_fixed_root(
    jaeger: Jaeger, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run({})
    _export(jaeger, run, monkeypatch)
    spans = views(jaeger.trace(trace_id_for(UID), min_spans=6))

    root = one(spans, "swarmkit.run team-a/nightly")
    assert root.span_id == root_span_id(UID) and root.parent_id is None
    assert root.service == "swarmkit-operator"
    assert root.tags["swarmkit.run.reason"] == "Succeeded"
    for name in ("reconcile", "bundle", "job.create", "observe", "condition Succeeded"):
        assert one(spans, name).parent_id == root.span_id
    observe = one(spans, "observe")
    assert observe.raw["duration"] == pytest.approx(2.4e6, rel=0.01)  # job_created → pod done
    assert not one(spans, "swarmkit.run team-a/nightly").raw.get("references")


def test_a_scheduled_run_links_to_its_schedule_both_ways(
    jaeger: Jaeger, monkeypatch: pytest.MonkeyPatch
) -> None:
    uid = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
    labels = {run_tracing.SCHEDULED_LABEL: "true", run_tracing.TOPOLOGY_LABEL: "nightly-review"}
    _export(jaeger, _run(labels, uid), monkeypatch)
    schedule_trace = trace_id_for("team-a/nightly-review/schedule")
    [tick] = views(jaeger.trace(schedule_trace, min_spans=1))
    spans = views(jaeger.trace(trace_id_for(uid), min_spans=6))

    root = one(spans, "swarmkit.run team-a/nightly")
    assert tick.name == "schedule nightly-review"
    follows = [r for r in root.raw["references"] if r["traceID"] == schedule_trace]
    assert [r["spanID"] for r in follows] == [tick.span_id]
    back = [r for r in tick.raw["references"] if r["traceID"] == trace_id_for(uid)]
    assert [r["spanID"] for r in back] == [root.span_id]


def test_nothing_is_exported_without_an_endpoint_or_a_trace_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert not run_tracing.RunSpans(os.environ).export(_run({}), "Succeeded", "True", {})
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    untraced = _run({})
    untraced.status.pop("traceId")
    assert not run_tracing.RunSpans(os.environ).export(untraced, "Succeeded", "True", {})


def test_the_schedule_label_is_the_one_the_schedule_controller_sets() -> None:
    assert run_tracing.SCHEDULED_LABEL == schedule.SCHEDULED_LABEL
    assert run_tracing.TOPOLOGY_LABEL == schedule.TOPOLOGY_LABEL
