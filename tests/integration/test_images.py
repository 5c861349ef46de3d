"""The images ``make images`` builds, run by the process node in their own root filesystems:
a runner pod of the real runtime image sees its bundle at ``/etc/swarmkit/bundle`` (no path
prefix), runs as 65532, cannot write its read-only root (EROFS) and leaves the host's ``/dev``
alone, and every module the runner imports has bytecode Python uses (no recompiling on each
start); the example Run succeeds in that image.

Skipped, saying why, when the images are not built or are stale (``make images`` builds them;
``make test`` rebuilds stale ones that were built before). The Helm install test uses the real
operator image in the same way (tests/integration/test_helm_install.py).
"""

from __future__ import annotations

import json
import os
import textwrap
from typing import Any

import pytest

from swarmkit_devcluster.imagebuild import image_status
from swarmkit_devcluster.testing import Kube, wait_for

from .runs_support import (
    REPO,
    RUNTIME,
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

STATUS = image_status(REPO)
pytestmark = pytest.mark.skipif(
    STATUS.get(RUNTIME) != "ok",
    reason=f"runtime image {STATUS.get(RUNTIME)}: run `make images` (sudo; ~6 min cold) to "
    "build it, then these tests run in it",
)

PROBE = textwrap.dedent(
    """
    import errno, json, os, sys
    out = {"uid": os.getuid(), "gid": os.getgid(), "python": sys.executable}
    out["bundle"] = sorted(os.listdir("/etc/swarmkit/bundle"))
    out["bundleText"] = open("/etc/swarmkit/bundle/run.json").read()
    out["prefixEnv"] = sorted(k for k in os.environ if "PREFIX" in k)
    out["hostCheckout"] = os.path.exists(os.environ["CHECKOUT"] + "/pyproject.toml")
    try:
        open("/opt/swarmkit/written-by-pod", "w").write("x")
        out["rootWrite"] = "ok"
    except OSError as exc:
        out["rootWrite"] = errno.errorcode.get(exc.errno, str(exc.errno))
    open("/scratch/ok", "w").write("volume is writable")
    out["scratch"] = open("/scratch/ok").read()
    out["tini"] = os.path.exists("/usr/bin/tini")
    import swarmkit_runner
    out["runner"] = swarmkit_runner.__file__
    # Every module the runner's start imports from the image has bytecode Python will use
    # (a stale .pyc is recompiled on every start: the read-only image cannot cache it).
    import importlib.util, swarmkit_runner.runner
    checked, stale = 0, []
    for mod in list(sys.modules.values()):
        src = getattr(mod, "__file__", None) or ""
        if not src.startswith("/opt/swarmkit/") or not src.endswith(".py"):
            continue
        checked += 1
        try:
            head = open(importlib.util.cache_from_source(src), "rb").read(16)
        except OSError:
            stale.append(mod.__name__)
            continue
        flags = int.from_bytes(head[4:8], "little")
        st = os.stat(src)
        if flags & 1:  # hash-based: valid unless it asks for a source check
            ok = not flags & 2
        else:
            ok = int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
        if not ok:
            stale.append(mod.__name__)
    out["bytecode"] = {"checked": checked, "stale": stale[:5]}
    open("/dev/termination-log", "w").write(json.dumps(out))
    """
)


def _terminated(kube: Kube, ns: str, name: str) -> Any:
    def state() -> Any:
        pod = kube.core.read_namespaced_pod(name, ns)
        for cs in pod.status.container_statuses or ():
            if cs.state.terminated is not None:
                return cs.state.terminated
        return None

    wait_for(state, 90, message=f"pod {name} to terminate")
    return state()


@pytest.mark.pod_security("privileged")  # a hand-made probe pod, not an operator-built one
def test_runner_pod_sees_its_real_paths_in_the_runtime_image(kube: Kube, namespace: str) -> None:
    host_dev = sorted(os.listdir("/dev"))
    kube.core.create_namespaced_config_map(
        namespace,
        {"metadata": {"name": "bundle"}, "data": {"run.json": '{"input": "hello"}'}},
    )
    container = {
        "name": "runner",
        "image": RUNTIME,
        "command": ["python", "-c", PROBE],
        "env": [{"name": "CHECKOUT", "value": str(REPO)}],
        "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False},
        "volumeMounts": [
            {"name": "bundle", "mountPath": "/etc/swarmkit/bundle", "readOnly": True},
            {"name": "scratch", "mountPath": "/scratch"},
        ],
    }
    pod = {
        "metadata": {"name": "probe"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [container],
            "volumes": [
                {"name": "bundle", "configMap": {"name": "bundle"}},
                {"name": "scratch", "emptyDir": {}},
            ],
        },
    }
    kube.core.create_namespaced_pod(namespace, pod)
    term = _terminated(kube, namespace, "probe")
    assert term.exit_code == 0, term
    seen = json.loads(term.message)
    assert (seen["uid"], seen["gid"]) == (65532, 65532)  # the image's USER
    assert seen["bundle"] == ["run.json"] and seen["bundleText"] == '{"input": "hello"}'
    assert seen["prefixEnv"] == []
    assert seen["rootWrite"] == "EROFS"
    assert seen["scratch"] == "volume is writable"
    assert seen["python"] == "/opt/swarmkit/bin/python"
    assert not seen["tini"]  # the runner is PID 1 itself: tini kept the secrets readable
    assert seen["runner"].startswith("/opt/swarmkit/lib/python3.11/site-packages/")
    assert seen["hostCheckout"] is False  # the image's filesystem, not the host's
    assert seen["bytecode"]["checked"] > 50 and seen["bytecode"]["stale"] == [], seen["bytecode"]
    assert sorted(os.listdir("/dev")) == host_dev
    assert not os.path.exists("/dev/termination-log")
    events = kube.core.list_namespaced_event(namespace, field_selector="involvedObject.name=probe")
    pulled = [e.message for e in events.items if e.reason == "Pulled"]
    assert pulled and "(root filesystem)" in pulled[0]


def test_example_run_succeeds_in_the_runtime_image(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    apply_examples(kube, namespace)
    wait_ready(kube, namespace, "Topology", "review-pipeline")
    create(kube, namespace, run_manifest("image-demo"))
    run = wait_run(kube, namespace, "image-demo", finished, timeout=150, operator=operator)
    cond = succeeded(run)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "Succeeded"), debug(
        kube, namespace, operator
    )
    assert "verdict is pass" in run["status"]["output"]
    pod_name = run["status"]["podName"]
    events = kube.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={pod_name}"
    )
    pulled = [e.message for e in events.items if e.reason == "Pulled"]
    assert pulled == [f'Container image "{RUNTIME}" already present on machine (root filesystem)']
