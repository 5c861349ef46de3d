"""Test helpers behind the pytest fixtures in ``tests/integration/conftest.py``.

* :func:`session_cluster` - a cluster for the whole test session: reuses the cluster whose
  kubeconfig ``$SWARMKIT_KUBECONFIG`` points at (e.g. ``.cluster/kubeconfig`` after
  ``make cluster-up``), else starts one in a temp dir and stops it at the end. ``KUBECONFIG``
  is exported into ``os.environ`` meanwhile (and ``.cluster/bin``-style ``PATH``).
* :func:`temp_namespace` - a fresh namespace (with its ``default`` ServiceAccount and
  ``kube-root-ca.crt`` ready), deleted afterwards.
* :func:`apply_crds` - apply ``crds/*.yaml`` server-side and wait until Established.
* :class:`Kube` - ``kubernetes`` API objects for a kubeconfig.
* :func:`wait_for` - poll a predicate with a timeout and a useful failure message.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from swarmkit_devcluster.cluster import ClusterError, LocalCluster
from swarmkit_devcluster.process_node.containers import SANDBOX

T = TypeVar("T")


def writes_by_resource(metrics_text: str) -> dict[str, int]:
    """An operator's write requests by ``"VERB resource"``, from its Prometheus text
    (``swarmkit_api_requests_total``); the leader election's Lease renewals aside: a quiet
    operator still renews, and they are not the writes a benchmark or a test counts."""
    out: dict[str, int] = {}
    for line in metrics_text.splitlines():
        if not line.startswith("swarmkit_api_requests_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if (
            labels.get("verb") in ("POST", "PATCH", "PUT", "DELETE")
            and labels.get("resource") != "leases"
        ):
            key = f"{labels['verb']} {labels['resource']}"
            out[key] = out.get(key, 0) + int(float(line.rsplit(" ", 1)[1]))
    return out


class WaitTimeout(AssertionError):
    """wait_for gave up."""


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 60.0,
    interval: float = 0.2,
    message: str | Callable[[], str] = "",
) -> T:
    """Call ``predicate`` until it returns something truthy (returned) or ``timeout`` passes.

    Exceptions raised by the predicate count as "not yet" and the last one is reported.
    ``message`` (a string or a callable evaluated on timeout) is added to the failure.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
            last_exc = None
        except Exception as exc:
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = message() if callable(message) else message
            extra = f" (last error: {last_exc!r})" if last_exc else ""
            raise WaitTimeout(f"timed out after {timeout:.0f}s{extra}: {detail}")
        time.sleep(interval)


@dataclass
class Kube:
    """Clients of the ``kubernetes`` package bound to one kubeconfig."""

    api_client: Any
    core: Any  # kubernetes.client.CoreV1Api
    batch: Any  # kubernetes.client.BatchV1Api
    apps: Any  # kubernetes.client.AppsV1Api
    custom: Any  # kubernetes.client.CustomObjectsApi
    rbac: Any  # kubernetes.client.RbacAuthorizationV1Api
    apiext: Any  # kubernetes.client.ApiextensionsV1Api

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | os.PathLike[str]) -> Kube:
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        return cls(
            api_client=api,
            core=client.CoreV1Api(api),
            batch=client.BatchV1Api(api),
            apps=client.AppsV1Api(api),
            custom=client.CustomObjectsApi(api),
            rbac=client.RbacAuthorizationV1Api(api),
            apiext=client.ApiextensionsV1Api(api),
        )

    def close(self) -> None:
        close = getattr(self.api_client, "close", None)
        if callable(close):
            close()


TEMP_PREFIX = "swarmkit-cluster-"
OWNER_FILE = "owner.pid"


def reap_abandoned_clusters() -> list[Path]:
    """Stop private test clusters whose owning test process died without tearing them down."""
    reaped = []
    for d in Path(tempfile.gettempdir()).glob(TEMP_PREFIX + "*"):
        try:
            owner = int((d / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if owner == os.getpid() or pid_alive(owner):
            continue
        LocalCluster(d, verbose=False).stop()
        reaped.append(d)
    return reaped


@contextmanager
def session_cluster() -> Iterator[LocalCluster]:
    """Reuse ``$SWARMKIT_KUBECONFIG``'s cluster, else start a private one (stopped at exit)."""
    reuse = os.environ.get("SWARMKIT_KUBECONFIG")
    owned = False
    if reuse:
        state_dir = Path(reuse).expanduser().resolve().parent
        cluster = LocalCluster(state_dir, verbose=False)
        if not cluster.is_running():
            raise ClusterError(
                f"SWARMKIT_KUBECONFIG={reuse} does not point at a running swarmkit devcluster "
                f"(no live {state_dir}/state.json); run `make cluster-up` or unset it"
            )
    else:
        reap_abandoned_clusters()
        state_dir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
        (state_dir / OWNER_FILE).write_text(str(os.getpid()))
        cluster = LocalCluster(state_dir, verbose=True)
        cluster.start()
        owned = True
    saved = {k: os.environ.get(k) for k in ("KUBECONFIG", "PATH")}
    os.environ.update(cluster.env())
    try:
        yield cluster
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if owned:
            cluster.stop()


def namespace_name(hint: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", hint.lower()).strip("-")[:40].strip("-") or "test"
    return f"{base}-{secrets.token_hex(3)}"


#: The Pod Security Standard the suite's namespaces enforce.
POD_SECURITY_LEVEL = "restricted"


def pod_security_labels(level: str) -> dict[str, str]:
    """Namespace labels that make the apiserver enforce (and warn on) ``level``."""
    return {
        "pod-security.kubernetes.io/enforce": level,
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": level,
    }


@contextmanager
def temp_namespace(
    kube: Kube,
    hint: str = "test",
    *,
    timeout: float = 30,
    pod_security: str | None = POD_SECURITY_LEVEL,
) -> Iterator[str]:
    """A fresh namespace, ready for pods (default SA and kube-root-ca.crt exist).

    Its Pod Security Admission level is enforced by the apiserver (``restricted`` unless a
    test that makes deliberately unconfined pods asks for less), so every pod the operator
    builds in the suite is proven compliant."""
    name = namespace_name(hint)
    labels = {"swarmkit.dev/test": "1"}
    if pod_security is not None:
        labels.update(pod_security_labels(pod_security))
    kube.core.create_namespace({"metadata": {"name": name, "labels": labels}})
    try:
        wait_for(
            lambda: kube.core.read_namespaced_service_account("default", name),
            timeout,
            message=f"the default ServiceAccount in namespace {name}",
        )
        wait_for(
            lambda: kube.core.read_namespaced_config_map("kube-root-ca.crt", name),
            timeout,
            message=f"kube-root-ca.crt in namespace {name}",
        )
        yield name
    finally:
        try:
            kube.core.delete_namespace(name, propagation_policy="Background")
        except Exception as exc:  # the cluster may be gone already
            print(f"warning: could not delete namespace {name}: {exc}")


def apply_crds(cluster: LocalCluster, crds_dir: Path | None = None) -> list[Path]:
    """``kubectl apply --server-side`` every ``crds/*.yaml`` and wait until Established."""
    from swarmkit_devcluster.paths import repo_root

    d = crds_dir or repo_root() / "crds"
    files = sorted(d.glob("*.yaml"))
    if not files:
        raise ClusterError(f"no CRDs in {d}/*.yaml (run `make generate`)")
    args = [a for f in files for a in ("-f", str(f))]
    cluster.kubectl("apply", "--server-side", "--force-conflicts", *args)
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *args)
    return files


def pod_pids(pod: Any) -> list[int]:
    """Process ids of a process-node pod's containers (from ``containerID: process://PID``)."""
    pids = []
    for cs in (pod.status.container_statuses or []) + (pod.status.init_container_statuses or []):
        cid = cs.container_id or ""
        if cid.startswith("process://"):
            pids.append(int(cid.removeprefix("process://")))
    return pids


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def run_with_mounts(
    argv: list[str],
    mounts: dict[str, str],
    *,
    work_dir: Path,
    env: dict[str, str] | None = None,
    cwd: str = "/",
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as the process node runs a host-command container: in a private mount
    namespace where each host path of ``mounts`` is bind-mounted at its container path
    (a host *file* mounted as a file), the host's filesystem everywhere else."""
    spec = {
        "root": str(work_dir / "root"),
        "upper": str(work_dir / "rw"),
        "mounts": [
            {"source": src, "target": dst, "file": Path(src).is_file()}
            for src, dst in sorted(mounts.items(), key=lambda kv: len(kv[1]))
        ],
        "cwd": cwd,
        "argv": argv,
        "errorFile": str(work_dir / "start-error"),
    }
    spec_file = work_dir / "launch.json"
    spec_file.write_text(json.dumps(spec))
    return subprocess.run(
        [sys.executable, "-I", "-S", SANDBOX, str(spec_file)],
        env=env if env is not None else dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
