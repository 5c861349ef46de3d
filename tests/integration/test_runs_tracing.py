"""One trace per Run, seen in a real Jaeger: the operator's spans and the runner's share it.

Real control plane, process node, operator process (exporting its spans to Jaeger over
OTLP/HTTP) and runner process (the Job's, with the ``TRACEPARENT`` the operator gave it);
Jaeger v2 built from Go modules (``make jaeger``). The trace is read back through Jaeger's
query API.
"""

from __future__ import annotations

import copy
import os
import subprocess
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.jaeger import Jaeger
from swarmkit_devcluster.testing import Kube
from tests.support.tracing import by_name, one, views

from .review_support import (
    answer_and_resume,
    escalating_deploy,
    park_deploy_run,
    review_admission,  # noqa: F401  (fixture)
)
from .runs_support import (
    CLI,
    OperatorProcess,
    apply,
    apply_examples,
    create,
    debug,
    example,
    finished,
    jobs,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)

pytestmark = pytest.mark.operator_settings(tracing=True)


def _traced_workspace(kube: Kube, namespace: str, tracing: dict[str, Any]) -> None:
    ws = copy.deepcopy(example("Workspace"))
    ws["spec"]["tracing"] = tracing
    apply(kube, namespace, ws)


def test_a_run_is_one_trace_from_the_operator_through_the_runner(
    kube: Kube, namespace: str, operator: OperatorProcess, jaeger: Jaeger, cluster: LocalCluster
) -> None:
    apply_examples(kube, namespace)
    _traced_workspace(kube, namespace, {"endpoint": jaeger.otlp_http_endpoint})
    wait_ready(kube, namespace, "Topology", "review-pipeline")
    create(kube, namespace, run_manifest("traced", correlationId="pr-7"))
    run = wait_run(kube, namespace, "traced", finished, operator=operator)
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "Succeeded", debug(kube, namespace, operator)

    uid = run["metadata"]["uid"]
    trace_id = run["status"]["traceId"]
    assert trace_id == uid.replace("-", "")
    (job,) = jobs(kube, namespace)
    env = {e.name: e.value for e in job.spec.template.spec.containers[0].env}
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == jaeger.otlp_http_endpoint
    assert env["TRACEPARENT"].startswith(f"00-{trace_id}-") and env["TRACEPARENT"].endswith("-01")
    assert "SWARMKIT_TRACE_CONTENT_CHARS" not in env  # content is opt-in

    spans = views(jaeger.trace(trace_id, min_spans=12, timeout=30))
    root = one(spans, f"swarmkit.run {namespace}/traced")
    assert root.parent_id is None
    assert root.service == "swarmkit-operator"
    assert root.tags["swarmkit.run.uid"] == uid
    assert root.span_id == env["TRACEPARENT"].split("-")[2]
    for name in ("reconcile", "bundle", "job.create", "observe", "condition Succeeded"):
        assert one(spans, name).parent_id == root.span_id, name

    # The runner's spans hang under the operator's root span, in the same trace.
    coordinator = one(spans, "invoke_agent coordinator")
    assert coordinator.service == "swarmkit-runner"
    assert coordinator.parent_id == root.span_id
    reviewer = one(spans, "invoke_agent reviewer")
    # The coordinator delegates to the reviewer: its tool call span is the reviewer's parent.
    delegate = next(s for s in spans if s.span_id == reviewer.parent_id)
    assert delegate.name.startswith("execute_tool delegate_to_")
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert chats and all(c.tags["gen_ai.provider.name"] == "swarmkit.replay" for c in chats)
    assert {s.service for s in spans} == {"swarmkit-operator", "swarmkit-runner"}
    assert not by_name(spans, "gen_ai.input.messages")

    # `kubectl swarmkit logs` names the trace (on stderr; stdout stays the audit lines).
    res = subprocess.run(
        [CLI, "logs", "run/traced", "-n", namespace, "-o", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "NO_COLOR": "1"},
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert f"trace: {trace_id}" in res.stderr.splitlines()
    assert all(line.startswith("{") for line in res.stdout.splitlines() if line.strip())


def test_an_untraced_workspace_gets_no_trace_id_and_no_tracing_env(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    apply_examples(kube, namespace)
    wait_ready(kube, namespace, "Topology", "review-pipeline")
    create(kube, namespace, run_manifest("plain"))
    run = wait_run(kube, namespace, "plain", finished, operator=operator)
    assert "traceId" not in run["status"]
    (job,) = jobs(kube, namespace)
    names = {e.name for e in job.spec.template.spec.containers[0].env}
    assert not {n for n in names if n.startswith("OTEL_") or n == "TRACEPARENT"}


@pytest.mark.usefixtures("review_admission")
def test_a_parked_and_resumed_run_is_one_trace(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess, jaeger: Jaeger
) -> None:
    ns = namespace

    def traced(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Workspace":
            doc["spec"]["tracing"] = {"endpoint": jaeger.otlp_http_endpoint}
        return doc

    escalating_deploy(cluster, kube, ns, edit=traced)
    park_deploy_run(kube, ns, operator)
    run = answer_and_resume(cluster, kube, ns, "ship", operator)

    trace_id = run["status"]["traceId"]
    spans = views(jaeger.trace(trace_id, min_spans=12, timeout=30))
    root = one(spans, f"swarmkit.run {ns}/ship")
    assert root.tags["swarmkit.run.resumes"] == 1
    for name in ("review.wait", "job.resume"):
        assert one(spans, name).parent_id == root.span_id, name
    # Both Jobs' runners joined the one trace under the Run's root span.
    stages = by_name(spans, "invoke_agent deployer")
    assert len(stages) == 2 and {s.parent_id for s in stages} == {root.span_id}
    assert len({s.process_id for s in stages}) == 2  # two runner processes
    calls = sorted(by_name(spans, "execute_tool deploy"), key=lambda s: s.start)
    assert [c.tag("swarmkit.decision") for c in calls] == ["review", "allowed"]
    assert calls[0].tag("swarmkit.review.key")
