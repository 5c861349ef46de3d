"""Smoke tests of the local control plane and the process node (real apiserver, real Job
controller and garbage collector)."""

from __future__ import annotations

import json
import sys
import textwrap
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, pid_alive, pod_pids, wait_for

# Hand-made pods that exercise the node and the control plane, not operator-built ones.
pytestmark = [pytest.mark.integration, pytest.mark.pod_security("privileged")]

PY = "python:3.12-slim"


def job(name: str, script: str, *, backoff: int = 0, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": backoff,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 2,
                    "containers": [
                        {
                            "name": "main",
                            "image": PY,
                            "command": ["python", "-c", textwrap.dedent(script)],
                        }
                    ],
                    **spec,
                }
            },
        },
    }


def job_condition(kube: Kube, ns: str, name: str, typ: str) -> Any:
    j = kube.batch.read_namespaced_job(name, ns)
    for c in j.status.conditions or []:
        if c.type == typ and c.status == "True":
            return c
    return None


def job_pods(kube: Kube, ns: str, name: str) -> list[Any]:
    return list(kube.core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items)


def describe(kube: Kube, ns: str) -> str:
    pods = kube.core.list_namespaced_pod(ns).items
    return json.dumps(
        [{"name": p.metadata.name, "status": p.status.to_dict()} for p in pods], default=str
    )[:3000]


def test_job_completes_with_termination_message(
    kube: Kube, namespace: str, cluster: LocalCluster
) -> None:
    script = """
        import os
        print("hello from", os.environ["HOSTNAME"], flush=True)
        with open("/dev/termination-log", "w") as fh:
            fh.write('{"result": "ok"}')
    """
    kube.batch.create_namespaced_job(namespace, job("hello", script))
    wait_for(
        lambda: job_condition(kube, namespace, "hello", "Complete"),
        60,
        message=lambda: describe(kube, namespace),
    )
    (pod,) = job_pods(kube, namespace, "hello")
    assert pod.status.phase == "Succeeded"
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 0
    assert term.reason == "Completed"
    assert term.message == '{"result": "ok"}'
    assert term.started_at is not None and term.finished_at is not None
    assert f"hello from {pod.metadata.name}" in cluster.pod_logs(namespace, pod.metadata.name)
    # kubectl logs goes through the apiserver to the process node's kubelet port.
    out = cluster.kubectl("logs", "-n", namespace, pod.metadata.name).stdout
    assert f"hello from {pod.metadata.name}" in out


def test_failing_job_hits_backoff_limit(kube: Kube, namespace: str) -> None:
    kube.batch.create_namespaced_job(
        namespace, job("fails", "import sys; print('boom'); sys.exit(3)", backoff=1)
    )
    cond = wait_for(
        lambda: job_condition(kube, namespace, "fails", "Failed"),
        90,
        message=lambda: describe(kube, namespace),
    )
    assert cond.reason == "BackoffLimitExceeded"
    pods = job_pods(kube, namespace, "fails")
    assert len(pods) == 2
    for p in pods:
        assert p.status.phase == "Failed"
        term = p.status.container_statuses[0].state.terminated
        assert (term.exit_code, term.reason) == (3, "Error")


def test_deleting_job_deletes_pods_and_kills_processes(kube: Kube, namespace: str) -> None:
    script = """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        time.sleep(600)
    """
    kube.batch.create_namespaced_job(namespace, job("sleeper", script))

    def running() -> Any:
        pods = job_pods(kube, namespace, "sleeper")
        if pods and pods[0].status.phase == "Running" and pod_pids(pods[0]):
            return pods[0]
        return None

    pod = wait_for(running, 60, message=lambda: describe(kube, namespace))
    (pid,) = pod_pids(pod)
    assert pid_alive(pid)
    children = [
        int(c)
        for c in open(f"/proc/{pid}/task/{pid}/children").read().split()  # noqa: SIM115
    ]
    kube.batch.delete_namespaced_job("sleeper", namespace, propagation_policy="Background")
    wait_for(
        lambda: not job_pods(kube, namespace, "sleeper"),
        60,
        message=lambda: describe(kube, namespace),
    )
    wait_for(lambda: not pid_alive(pid), 10, message=f"process {pid} still running")
    wait_for(
        lambda: not any(pid_alive(c) for c in children), 10, message=f"children {children} alive"
    )


def test_unknown_image_is_err_image_pull(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "nope"},
            "spec": {"containers": [{"name": "c", "image": "registry.example/nope:1.0"}]},
        },
    )

    def waiting() -> Any:
        p = kube.core.read_namespaced_pod("nope", namespace)
        for cs in p.status.container_statuses or []:
            if cs.state.waiting and cs.state.waiting.reason == "ErrImagePull":
                return p
        return None

    pod = wait_for(waiting, 30, message=lambda: describe(kube, namespace))
    assert pod.status.phase == "Pending"
    assert "registry.example/nope:1.0" in pod.status.container_statuses[0].state.waiting.message


def test_env_from_secret_and_configmap_volume(
    kube: Kube, namespace: str, cluster: LocalCluster
) -> None:
    kube.core.create_namespaced_secret(
        namespace, {"metadata": {"name": "creds"}, "stringData": {"password": "s3cret"}}
    )
    kube.core.create_namespaced_config_map(
        namespace,
        {"metadata": {"name": "app"}, "data": {"config.yaml": "greeting: hi\n", "mode": "fast"}},
    )
    script = """
        import json, os, sys
        out = {
            "password": os.environ["PASSWORD"],
            "pod": os.environ["POD_NAME"],
            "ns": os.environ["POD_NAMESPACE"],
            "mode": os.environ["CFG_mode"],
            "arg": open(sys.argv[1]).read(),
            "direct": open("/etc/app/config.yaml").read(),
            "scratch": os.path.isdir("/scratch"),
            "cwd": os.getcwd() == "/work",
            "prefix": "SWARMKIT_PATH_PREFIX" in os.environ,
        }
        open("/dev/termination-log", "w").write(json.dumps(out))
    """
    spec = job("env", script)
    pod_spec = spec["spec"]["template"]["spec"]
    c = pod_spec["containers"][0]
    c["args"] = ["/etc/app/config.yaml"]
    c["workingDir"] = "/work"
    c["env"] = [
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    c["envFrom"] = [{"prefix": "CFG_", "configMapRef": {"name": "app"}}]
    c["volumeMounts"] = [
        {"name": "cfg", "mountPath": "/etc/app", "readOnly": True},
        {"name": "scratch", "mountPath": "/scratch"},
    ]
    pod_spec["volumes"] = [
        {"name": "cfg", "configMap": {"name": "app"}},
        {"name": "scratch", "emptyDir": {}},
    ]
    kube.batch.create_namespaced_job(namespace, spec)
    wait_for(
        lambda: job_condition(kube, namespace, "env", "Complete"),
        60,
        message=lambda: (
            describe(kube, namespace)
            + "".join(
                cluster.pod_logs(namespace, p.metadata.name)
                for p in job_pods(kube, namespace, "env")
            )
        ),
    )
    (pod,) = job_pods(kube, namespace, "env")
    out = json.loads(pod.status.container_statuses[0].state.terminated.message)
    assert out == {
        "password": "s3cret",
        "pod": pod.metadata.name,
        "ns": namespace,
        "mode": "fast",
        "arg": "greeting: hi\n",
        "direct": "greeting: hi\n",
        "scratch": True,
        "cwd": True,
        "prefix": False,
    }


def test_projected_service_account_token_works_in_cluster(kube: Kube, namespace: str) -> None:
    script = """
        import json, os, ssl, urllib.request
        sa = "/var/run/secrets/kubernetes.io/serviceaccount"
        token = open(sa + "/token").read()
        ns = open(sa + "/namespace").read()
        ctx = ssl.create_default_context(cafile=sa + "/ca.crt")
        base = "https://%s:%s" % (os.environ["KUBERNETES_SERVICE_HOST"],
                                  os.environ["KUBERNETES_SERVICE_PORT"])
        def call(path, body=None):
            req = urllib.request.Request(base + path, data=body, headers={
                "Authorization": "Bearer " + token, "Content-Type": "application/json"})
            with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
                return json.load(resp)
        version = call("/version")["gitVersion"]
        review = call("/apis/authentication.k8s.io/v1/selfsubjectreviews", json.dumps({
            "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode())
        user = review["status"]["userInfo"]["username"]
        open("/dev/termination-log", "w").write(
            json.dumps({"version": version, "user": user, "ns": ns}))
    """
    kube.batch.create_namespaced_job(namespace, job("incluster", script))
    wait_for(
        lambda: job_condition(kube, namespace, "incluster", "Complete"),
        60,
        message=lambda: describe(kube, namespace),
    )
    (pod,) = job_pods(kube, namespace, "incluster")
    out = json.loads(pod.status.container_statuses[0].state.terminated.message)
    assert out == {
        "version": "v1.36.3",
        "user": f"system:serviceaccount:{namespace}:default",
        "ns": namespace,
    }


def test_init_container_and_active_deadline(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "deadline"},
            "spec": {
                "restartPolicy": "Never",
                "activeDeadlineSeconds": 3,
                "initContainers": [
                    {"name": "init", "image": PY, "command": ["python", "-c", "print('init')"]}
                ],
                "containers": [
                    {
                        "name": "main",
                        "image": PY,
                        "command": ["python", "-c", "import time; time.sleep(600)"],
                    }
                ],
            },
        },
    )

    def failed() -> Any:
        p = kube.core.read_namespaced_pod("deadline", namespace)
        return p if p.status.phase == "Failed" else None

    pod = wait_for(failed, 30, message=lambda: describe(kube, namespace))
    assert pod.status.reason == "DeadlineExceeded"
    init = pod.status.init_container_statuses[0].state.terminated
    assert (init.exit_code, init.reason) == (0, "Completed")
    assert pod.status.container_statuses[0].state.terminated is not None
    for pid in pod_pids(pod):
        assert not pid_alive(pid)


@pytest.mark.parametrize("image_entrypoint", [True, False], ids=["image-entrypoint", "command"])
def test_checkout_under_a_mounted_directory_still_starts(
    kube: Kube, namespace: str, image_entrypoint: bool
) -> None:
    # CI clones the repo anywhere (e.g. under /tmp) and Run pods mount an emptyDir at /tmp:
    # the node's interpreter is a host path and must never be rewritten into the pod root.
    top = "/" + sys.executable.strip("/").split("/")[0]
    script = "import os; print('started', os.getcwd(), flush=True)"
    spec = job("mounted", script)
    container = spec["spec"]["template"]["spec"]["containers"][0]
    if image_entrypoint:  # the runtime image's entrypoint (python -m swarmkit_runner) + args
        container["image"] = "ghcr.io/swarmkit-operator/swarmkit-runtime:test"
        container.pop("command")
        container["args"] = ["--version"]
    container["volumeMounts"] = [{"name": "scratch", "mountPath": top}]
    spec["spec"]["template"]["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    kube.batch.create_namespaced_job(namespace, spec)
    wait_for(
        lambda: job_condition(kube, namespace, "mounted", "Complete"),
        60,
        message=lambda: describe(kube, namespace),
    )
