"""The process node runs pod processes at a lower priority than the control plane.

Here the node, the control plane and the operator share the same cores; on a real cluster
the workloads run on worker nodes of their own. So a busy node must not starve the
apiserver or the operator: every container process (and what it starts) runs 10 nicer
than the process node itself (docs/development/local-control-plane.md).
"""

from __future__ import annotations

import os
import textwrap
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, pod_pids, wait_for

# Hand-made pods that exercise the node and the control plane, not operator-built ones.
pytestmark = [pytest.mark.integration, pytest.mark.pod_security("privileged")]


def niceness(pid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid)


def test_pod_processes_run_nicer_than_the_node_and_the_apiserver(
    cluster: LocalCluster, kube: Kube, namespace: str
) -> None:
    script = """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        time.sleep(600)
    """
    kube.core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "busy"},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "main",
                        "image": "python:3.12-slim",
                        "command": ["python", "-c", textwrap.dedent(script)],
                    }
                ],
            },
        },
    )

    def started() -> Any:
        pod = kube.core.read_namespaced_pod("busy", namespace)
        pids = pod_pids(pod) if pod.status.phase == "Running" else []
        if not pids:
            return None
        children = open(f"/proc/{pids[0]}/task/{pids[0]}/children").read().split()  # noqa: SIM115
        return (pids[0], int(children[0])) if children else None

    pid, child = wait_for(started, 60, message="the pod's process and its child")
    procs = cluster.state["procs"]  # state.json: pid of every component
    node, apiserver = procs["process-node"]["pid"], procs["kube-apiserver"]["pid"]
    expected = min(19, niceness(node) + 10)

    assert niceness(pid) == expected
    assert niceness(child) == expected  # inherited by what the container starts
    assert niceness(apiserver) < expected
    kube.core.delete_namespaced_pod("busy", namespace, grace_period_seconds=0)
