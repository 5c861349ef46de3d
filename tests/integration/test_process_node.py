"""The process node's container view on the real control plane: every pod in its own mount
namespace with its volumes at their real mountPaths and a private /dev, resource limits,
and the Events a kubelet writes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from swarmkit_devcluster.testing import Kube, wait_for

# Hand-made pods that exercise the node and the control plane, not operator-built ones.
pytestmark = [pytest.mark.integration, pytest.mark.pod_security("privileged")]

PY = "python:3.12-slim"  # no local root filesystem: a host-command container


def pod(name: str, script: str, **container: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "main",
                    "image": PY,
                    "command": ["python", "-c", textwrap.dedent(script)],
                    **container,
                }
            ],
        },
    }


def finished(kube: Kube, ns: str, name: str, timeout: float = 60) -> Any:
    def done() -> Any:
        p = kube.core.read_namespaced_pod(name, ns)
        return p if p.status.phase in ("Succeeded", "Failed") else None

    return wait_for(
        done,
        timeout,
        message=lambda: str(kube.core.read_namespaced_pod(name, ns).status),
    )


def events(kube: Kube, ns: str, name: str) -> list[tuple[str, str, str]]:
    out = kube.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}")
    return [(e.type, e.reason, e.message) for e in out.items]


def test_volumes_are_at_their_mount_paths_and_the_host_is_untouched(
    kube: Kube, namespace: str
) -> None:
    kube.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "bundle"}, "data": {"bundle.json": '{"ok": 1}'}}
    )
    marker = f"swarmkit-node-test-{namespace}"
    # A mount point no host has (a CI host may well have a /scratch of its own).
    scratch = f"/scratch-{marker}"
    script = f"""
        import json, os
        out = {{
            "bundle": json.load(open("/etc/swarmkit/bundle/bundle.json")),
            "token": len(open("/var/run/secrets/kubernetes.io/serviceaccount/token").read()) > 20,
            "scratch": os.listdir("{scratch}"),
            "prefix": [k for k in os.environ if "PREFIX" in k],
        }}
        open("/dev/{marker}", "w").write("written inside")
        open("{scratch}/{marker}", "w").write("kept in the volume")
        try:
            open("/etc/swarmkit/bundle/new", "w")
        except OSError as exc:
            out["readonly_volume"] = exc.errno
        open("/dev/termination-log", "w").write(json.dumps(out))
    """
    spec = pod(
        "mounts",
        script,
        volumeMounts=[
            {"name": "bundle", "mountPath": "/etc/swarmkit/bundle", "readOnly": True},
            {"name": "scratch", "mountPath": scratch},
        ],
    )
    spec["spec"]["volumes"] = [
        {"name": "bundle", "configMap": {"name": "bundle"}},
        {"name": "scratch", "emptyDir": {}},
    ]
    kube.core.create_namespaced_pod(namespace, spec)
    p = finished(kube, namespace, "mounts")
    term = p.status.container_statuses[0].state.terminated
    assert (p.status.phase, term.exit_code) == ("Succeeded", 0), term.message
    out = json.loads(term.message)
    assert out == {
        "bundle": {"ok": 1},
        "token": True,
        "scratch": [],
        "prefix": [],
        "readonly_volume": 30,  # EROFS: a readOnly volume mount is read-only
    }
    # Nothing of it reached the host: not the mount points, not the pod's /dev.
    assert not Path(f"/dev/{marker}").exists()
    assert not Path("/etc/swarmkit/bundle").exists()
    assert not Path(scratch).exists()
    assert not Path("/var/run/secrets/kubernetes.io").exists()


def test_memory_limit_is_enforced(kube: Kube, namespace: str) -> None:
    script = """
        import sys
        try:
            block = bytearray(512 * 1024 * 1024)
        except MemoryError:
            sys.exit(42)
        print("allocated", len(block))
    """
    kube.core.create_namespaced_pod(
        namespace, pod("hog", script, resources={"limits": {"memory": "128Mi"}})
    )
    p = finished(kube, namespace, "hog")
    assert p.status.phase == "Failed"
    assert p.status.container_statuses[0].state.terminated.exit_code == 42


def test_start_and_failure_events(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(namespace, pod("ok", "print('hi')"))
    finished(kube, namespace, "ok")
    wait_for(lambda: len(events(kube, namespace, "ok")) >= 3, 30)
    reasons = [r for _t, r, _m in events(kube, namespace, "ok")]
    assert {"Pulled", "Created", "Started"} <= set(reasons), reasons

    bad = pod("nocmd", "")
    bad["spec"]["containers"][0]["command"] = ["/no/such/binary"]
    kube.core.create_namespaced_pod(namespace, bad)
    p = finished(kube, namespace, "nocmd")
    term = p.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (128, "StartError")
    assert "/no/such/binary" in term.message
    wait_for(
        lambda: any(
            t == "Warning" and r == "Failed" for t, r, _ in events(kube, namespace, "nocmd")
        ),
        30,
        message=lambda: str(events(kube, namespace, "nocmd")),
    )

    kube.core.create_namespaced_pod(
        namespace,
        {"metadata": {"name": "nope"}, "spec": {"containers": [{"name": "c", "image": "x/y:1"}]}},
    )
    wait_for(
        lambda: (
            ("Warning", "Failed", 'Failed to pull image "x/y:1"') in events(kube, namespace, "nope")
        ),
        30,
        message=lambda: str(events(kube, namespace, "nope")),
    )


def test_the_pod_environment_has_no_node_internals(kube: Kube, namespace: str) -> None:
    script = """
        import json, os
        open("/dev/termination-log", "w").write(json.dumps(sorted(os.environ)))
    """
    kube.core.create_namespaced_pod(
        namespace, pod("env", script, env=[{"name": "A", "value": "1"}])
    )
    p = finished(kube, namespace, "env")
    keys = json.loads(p.status.container_statuses[0].state.terminated.message)
    assert "A" in keys and "HOSTNAME" in keys and "KUBERNETES_SERVICE_HOST" in keys
    assert not [k for k in keys if k.startswith("SWARMKIT_PATH") or k == "SWARMKIT_POD_DIR"]
