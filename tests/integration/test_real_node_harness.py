"""Harness nodes on the real node (kubelet + containerd + runc): issue 40 items 1 and 2.

The same Topology as test_harness_claude.py (root node ``harness: {kind: claude-code}``,
``codex`` or ``gemini-cli``, each with a provider of its wire format),
its namespace pinned to the real node the way an administrator pins a tenant (test_real_node's
annotations), so the Run's Job pod runs the runtime image under runc: non-root, read-only root,
seccomp ``RuntimeDefault``, and the example Workspace's 512Mi memory limit as a *cgroup*,
which counts the ~220 MiB the CLI keeps resident, not the ~650 MiB it maps (the process node's
data rlimit does: there this limit fails the node, see test_harness_claude.py). The scripted
model server listens on the node's bridge address, which the Run's NetworkPolicy admits as the
provider's declared endpoint. Marked ``real_node``: a cluster without it fails, never skips.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.realnode import BRIDGE_IP, NODE_NAME
from swarmkit_devcluster.testing import Kube
from tests.support.model_server import ScriptedModelServer

from .runs_support import (
    RUNTIME,
    OperatorProcess,
    create,
    finished,
    run_manifest,
    succeeded,
    wait_run,
)
from .test_harness_claude import KEY, SAID, answer_with_tool, pod_log, setup
from .test_real_node import require_image
from .test_real_node_isolation import on_real_node

pytestmark = pytest.mark.real_node
__all__ = ["on_real_node"]  # the fixture, re-exported for this module's tests


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(api_key=KEY, host=BRIDGE_IP) as server:
        yield server


@pytest.mark.parametrize("kind", ["claude-code", "codex", "gemini-cli"])
def test_a_harness_run_succeeds_in_a_runc_pod_under_a_512mi_cgroup(
    cluster: LocalCluster,
    kube: Kube,
    on_real_node: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
    kind: str,
) -> None:
    ns = on_real_node
    require_image(cluster, RUNTIME)
    setup(kube, ns, model, memory="512Mi", kind=kind)
    model.default = answer_with_tool("notes")
    create(kube, ns, run_manifest("rn-1", "release", input="Check the notes.", timeout=600))
    run = wait_run(kube, ns, "rn-1", finished, operator=operator, timeout=600)
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "Succeeded", json.dumps(run.get("status"))
    status = run["status"]
    [pod] = kube.core.list_namespaced_pod(ns, label_selector=f"job-name={status['jobName']}").items
    assert pod.spec.node_name == NODE_NAME
    [runner] = [c for c in pod.spec.containers if c.image == RUNTIME]
    assert runner.resources.limits["memory"] == "512Mi"
    assert runner.security_context.read_only_root_filesystem is True
    # The scripted model answers with the tool's result (the command skill's JSON).
    assert status["output"].startswith("The tool said: ") and SAID in status["output"]
    answered = [r for r in model.requests if not r.problems]
    assert model.refused == [] and answered
    assert status["usage"]["outputTokens"] == 5 * len(answered)
    log = pod_log(cluster, ns, status["jobName"])
    events = [json.loads(x) for x in log.splitlines() if x.startswith("{")]
    [start] = [e for e in events if e["event"] == "harness.start"]
    assert start["harness"] == kind
    [end] = [e for e in events if e["event"] == "harness.end"]
    assert end["exit_code"] == 0 and end["outcome"] == "ok", end
    [call] = [e for e in events if e["event"] == "tool.call" and e.get("skill") == "notes"]
    assert call["outcome"] == "ok"
    for where in (log, json.dumps(run)):
        assert KEY not in where
    print(f"{kind} {start['version']} in the runc pod: {end['duration_ms']} ms")
