"""The GenAI client metrics of Runs on the operator's Prometheus endpoint.

Real control plane, process node, operator process (chart RBAC, leader election) and runner
processes with the replay provider. After a Run, the operator's ``/metrics`` holds
``gen_ai_client_operation_duration_seconds`` and ``gen_ai_client_token_usage`` for its model
calls; a restarted operator (a new leader) does not count the finished Run again.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from swarmkit_api.genai_metrics import TOKEN_BUCKETS
from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube
from tests.support.served import free_port

from .review_support import (
    answer_and_resume,
    escalating_deploy,
    park_deploy_run,
    review_admission,  # noqa: F401  (fixture)
)
from .runs_support import (
    OperatorProcess,
    apply_examples,
    create,
    debug,
    finished,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)

DURATION = "gen_ai_client_operation_duration_seconds"
TOKENS = "gen_ai_client_token_usage"
REPLAY = {
    "gen_ai_operation_name": "chat",
    "gen_ai_provider_name": "swarmkit.replay",
}


@pytest.fixture(scope="module")
def operator(cluster: LocalCluster, crds: Any) -> Iterator[OperatorProcess]:
    op = OperatorProcess(cluster.kubeconfig, env={"SWARMKIT_METRICS_PORT": str(free_port())})
    op.start()
    yield op
    op.stop()


def _scrape(op: OperatorProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    url = f"http://127.0.0.1:{op.extra_env['SWARMKIT_METRICS_PORT']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith(("gen_ai_",)):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _total(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **want: str
) -> float:
    total = 0.0
    for (sample, labels), value in samples.items():
        found = dict(labels)
        if sample == name and all(found.get(k) == v for k, v in {**REPLAY, **want}.items()):
            total += value
    return total


def _with_usage(doc: dict[str, Any]) -> dict[str, Any]:
    """The example Agents' replayed turns report token usage, each call different."""
    if doc["kind"] == "Agent":
        for i, turn in enumerate(doc["spec"].get("replay") or []):
            turn["usage"] = {"inputTokens": 300 + 97 * i, "outputTokens": 20 + 3 * i}
    return doc


def _run(kube: Kube, namespace: str, op: OperatorProcess, name: str) -> dict[str, Any]:
    create(kube, namespace, run_manifest(name))
    run = wait_run(kube, namespace, name, finished, operator=op)
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "Succeeded", debug(kube, namespace, op)
    return run


def test_a_runs_model_calls_are_on_the_operators_metrics_once(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    apply_examples(kube, namespace, edit=_with_usage)
    wait_ready(kube, namespace, "Topology", "review-pipeline")
    run = _run(kube, namespace, operator, "counted")
    status = run["status"]
    calls, usage = status["steps"], status["usage"]
    assert calls > 0 and usage["inputTokens"] > 0

    samples = _scrape(operator)
    # One duration observation per model call (the Run's model turns), none failed.
    assert _total(samples, f"{DURATION}_count", error_type="") == calls, samples
    assert _total(samples, f"{DURATION}_sum") > 0
    assert not [k for k in samples if dict(k[1]).get("error_type")]
    # The token histograms add up to the Run's usage, a call per observation.
    assert _total(samples, f"{TOKENS}_sum", gen_ai_token_type="input") == usage["inputTokens"]
    assert _total(samples, f"{TOKENS}_sum", gen_ai_token_type="output") == usage["outputTokens"]
    assert _total(samples, f"{TOKENS}_count", gen_ai_token_type="input") == calls
    # The conventions' boundaries, cumulative to +Inf.
    inf = _total(samples, f"{DURATION}_bucket", error_type="", le="+Inf")
    assert inf == calls
    top = floatToGoString(TOKEN_BUCKETS[-1])  # as prometheus_client renders an le
    assert _total(samples, f"{TOKENS}_bucket", gen_ai_token_type="input", le=top) == calls
    assert _total(samples, f"{TOKENS}_bucket", gen_ai_token_type="input", le="1.0") == 0

    # A new operator process (a restart, or a standby becoming leader) sees the Run final
    # and does not count it again; a later Run is counted by the new process alone.
    operator.stop()
    operator.start()
    later = _run(kube, namespace, operator, "after-restart")
    samples = _scrape(operator)
    assert _total(samples, f"{DURATION}_count", error_type="") == later["status"]["steps"]
    assert (
        _total(samples, f"{TOKENS}_sum", gen_ai_token_type="input")
        == later["status"]["usage"]["inputTokens"]
    )


@pytest.mark.usefixtures("review_admission")
def test_each_job_of_a_parked_and_resumed_run_counts_its_own_calls(
    cluster: LocalCluster, kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    before = _scrape(operator)

    escalating_deploy(cluster, kube, ns)
    replay = [
        {
            "toolCalls": [{"name": "deploy", "arguments": {"service": "checkout"}}],
            "usage": {"inputTokens": 1000, "outputTokens": 10},
        },
        {"text": "done", "usage": {"inputTokens": 2000, "outputTokens": 5}},
    ]
    park_deploy_run(kube, ns, operator, replay)
    parked = _scrape(operator)
    # The first Job made one call (the failed deploy waits for a person): counted when it
    # parked.
    assert _total(parked, f"{DURATION}_count") - _total(before, f"{DURATION}_count") == 1
    answer_and_resume(cluster, kube, ns, "ship", operator)
    after = _scrape(operator)
    # The resumed Job replays the first call from its journal (no model call, not in its
    # report) and makes one more: two calls in all, each counted once.
    assert _total(after, f"{DURATION}_count") - _total(before, f"{DURATION}_count") == 2
    tokens_in = _total(after, f"{TOKENS}_sum", gen_ai_token_type="input")
    assert tokens_in - _total(before, f"{TOKENS}_sum", gen_ai_token_type="input") == 3000
