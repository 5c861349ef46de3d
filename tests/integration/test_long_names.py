"""Every name the apiserver accepts works end to end (issue 47 item 5), on the real control
plane: a Workspace named with 253 characters (a DNS subdomain, the longest the apiserver
admits), an Agent and a Topology with 63 (their schema bounds names to a DNS label, since
they become tool names) reach Ready, and a Run of 253 characters through them succeeds:
every ConfigMap, Job, label and derived name the operator makes from them is accepted.
Before, the Workspace got no condition at all (a label derived from its name exceeded 63
bytes and the operator retried HTTP 422 forever)."""

from __future__ import annotations

from swarmkit_devcluster.testing import Kube

from .runs_support import (
    OperatorProcess,
    agent_with,
    create,
    example,
    jobs,
    reason_is,
    run_manifest,
    wait_ready,
    wait_run,
)

WORKSPACE = ".".join(["w" * 63, "x" * 63, "y" * 63, "z" * 61])
AGENT = "agent-" + "a" * 57
TOPOLOGY = "topology-" + "t" * 54
RUN = ".".join(["r" * 63, "s" * 63, "t" * 63, "u" * 61])


def test_the_longest_legal_names_reach_ready_and_run(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    assert len(WORKSPACE) == len(RUN) == 253 and len(AGENT) == len(TOPOLOGY) == 63
    ws = example("Workspace")
    ws["metadata"] = {"name": WORKSPACE}
    create(kube, namespace, ws)
    agent = agent_with(AGENT, [{"text": "done, with a long name"}])
    agent["spec"]["workspaceRef"] = {"name": WORKSPACE}
    create(kube, namespace, agent)
    topology = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": TOPOLOGY},
        "spec": {
            "workspaceRef": {"name": WORKSPACE},
            "agents": [{"name": "lead", "agentRef": {"name": AGENT}, "role": "root"}],
        },
    }
    create(kube, namespace, topology)
    for kind, name in (("Workspace", WORKSPACE), ("Agent", AGENT), ("Topology", TOPOLOGY)):
        wait_ready(kube, namespace, kind, name, timeout=60)

    create(kube, namespace, run_manifest(RUN, TOPOLOGY))
    run = wait_run(kube, namespace, RUN, reason_is("Succeeded"), 120, operator)
    assert "done, with a long name" in str(run["status"].get("output", ""))
    (job,) = jobs(kube, namespace)
    assert len(job.metadata.name) <= 63
