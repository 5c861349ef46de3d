"""The chart installed for real: `helm install` into a fresh local control plane.

The process node runs the operator pod from the chart's Deployment in the real operator image
when ``make images`` built it and the build is current (distroless root filesystem, uid
65532, read-only root), else as a local process (an image whose repository ends in
``swarmkit-operator`` is ``python -m swarmkit_operator``), with the chart's ServiceAccount
token, so the operator runs with exactly the chart's RBAC. Then:
``examples/`` and a Run succeed; the operator never hits a 403; `helm upgrade` with a new
approval list rolls the operator and the new pin takes effect; two replicas peer and only
one reconciles; `helm uninstall` leaves the CRDs and the users' objects in place. (Argo CD
health on real statuses, no drift and Run pods' lack of API access are in
test_helm_gitops.py, against the operator run as a process.)

This module starts its own cluster (not the session one): a cluster-wide operator installed
by Helm must not reconcile other tests' namespaces, and the CRDs must be Helm's own.
Timings (install → all examples Ready, operator pod start → first reconcile) are printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import kubernetes
import pytest
import yaml

from swarmkit_devcluster.cluster import ClusterError, LocalCluster, free_port
from swarmkit_devcluster.imagebuild import current_images_store, image_status
from swarmkit_devcluster.paths import binary
from swarmkit_devcluster.testing import (
    OWNER_FILE,
    POD_SECURITY_LEVEL,
    TEMP_PREFIX,
    Kube,
    pod_pids,
    pod_security_labels,
    reap_abandoned_clusters,
    wait_for,
)
from tests.integration.runs_support import PLURALS, examples

pytestmark = [pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "swarmkit-operator"
RELEASE = "sk"
SYSTEM_NS = "swarmkit-system"
TEAM_NS = "team-a"
DEPLOYMENT = f"{RELEASE}-swarmkit-operator"
SCRIPT_SKILL = "incident-triage"
SCRIPT_PATH = "scripts/classify_severity.py"
FIELD_MANAGER = "gitops"  # the users' (Argo CD's) field manager
CLK_TCK = os.sysconf("SC_CLK_TCK")
T = TypeVar("T")


def until(
    predicate: Callable[[], T | None], timeout: float, message: str | Callable[[], str] = ""
) -> T:
    """wait_for with a predicate that returns the value or None."""
    value = wait_for(predicate, timeout, message=message)
    assert value is not None
    return value


def boottime() -> float:
    """Seconds since boot, on the clock /proc/<pid>/stat start times use."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def process_start(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[19]) / CLK_TCK


@dataclass
class Release:
    cluster: LocalCluster
    kube: Kube
    ports: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        res = subprocess.run(
            [str(binary("helm")), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
        if check and res.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{res.stderr}")
        return res

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return self.cluster.kubectl(*args, input=input).stdout

    def values(self, **extra: Any) -> list[str]:
        """Values for this machine: the process node shares the host's network, so the
        operator's health and metrics ports must be free ones."""
        values = {
            "health": {"port": self.ports["health"]},
            "metrics": {"port": self.ports["metrics"]},
            **extra,
        }
        path = Path(tempfile.mkdtemp(prefix="sk-values-")) / "values.json"
        path.write_text(json.dumps(values))
        return ["-f", str(path)]

    def get(self, plural: str, name: str, ns: str = TEAM_NS) -> dict[str, Any]:
        obj = self.kube.custom.get_namespaced_custom_object(
            "swarmkit.dev", "v1alpha1", ns, plural, name
        )
        assert isinstance(obj, dict)
        return obj

    def operator_pods(self) -> list[Any]:
        pods = self.kube.core.list_namespaced_pod(
            SYSTEM_NS, label_selector=f"app.kubernetes.io/instance={RELEASE}"
        ).items
        return [p for p in pods if p.metadata.deletion_timestamp is None]

    def running_operator(self) -> Any:
        def one_running() -> Any:
            pods = self.operator_pods()
            running = [p for p in pods if p.status.phase == "Running" and pod_pids(p)]
            return running[0] if len(pods) == 1 and running else None

        return until(one_running, 60, message=self.operator_log)

    def operator_log(self) -> str:
        pods = self.operator_pods()
        if not pods:
            return "no operator pod"
        try:
            log = self.cluster.pod_logs(SYSTEM_NS, pods[0].metadata.name, "operator")
        except (ClusterError, OSError) as exc:
            return f"no operator log: {exc}"
        return "--- operator log (tail) ---\n" + "\n".join(log.splitlines()[-25:])

    def condition(self, obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return None

    def with_condition(
        self, plural: str, name: str, type_: str, ns: str = TEAM_NS
    ) -> dict[str, Any] | None:
        """The object once it has a ``type_`` condition."""
        obj = self.get(plural, name, ns)
        return obj if self.condition(obj, type_) else None

    def ready(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        """The live object of ``doc`` if it is Ready for its current generation."""
        obj = self.get(PLURALS[doc["kind"]], doc["metadata"]["name"])
        c = self.condition(obj, "Ready")
        generation = obj["metadata"].get("generation")
        if c and c["status"] == "True" and c.get("observedGeneration") == generation:
            return obj
        return None

    def wait_ready(self, kind: str, name: str, timeout: float = 60) -> dict[str, Any]:
        doc = {"kind": kind, "metadata": {"name": name}}
        return until(
            lambda: self.ready(doc),
            timeout,
            message=lambda: f"{kind} {name} Ready\n{self.operator_log()}",
        )


def example_docs() -> list[dict[str, Any]]:
    """examples/ without what starts Runs (the Run, the EvalRun): what a team keeps in Git."""
    return [d for d in examples() if d["kind"] not in ("Run", "EvalRun")]


def example_run() -> dict[str, Any]:
    (run,) = [d for d in examples() if d["kind"] == "Run"]
    return run


@pytest.fixture(scope="module")
def release() -> Iterator[Release]:
    """A private cluster with the chart installed and examples/ applied and Ready."""
    reap_abandoned_clusters()
    state = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    (state / OWNER_FILE).write_text(str(os.getpid()))
    if "SWARMKIT_NODE_IMAGE_STORE" not in os.environ:  # only current images (see conftest)
        store = Path(tempfile.mkdtemp(prefix="swarmkit-images-"))
        current_images_store(Path(__file__).resolve().parents[2], store)
        os.environ["SWARMKIT_NODE_IMAGE_STORE"] = str(store)
    cluster = LocalCluster(state, verbose=True)
    try:
        cluster.start()
    except ClusterError as exc:
        pytest.fail(f"local control plane: {exc}", pytrace=False)
    kube = Kube.from_kubeconfig(cluster.kubeconfig)
    rel = Release(cluster, kube, {"health": free_port(), "metrics": free_port()})
    try:
        # Both namespaces enforce Pod Security restricted: the chart's operator pod and every
        # pod it builds for the examples are admitted only if they comply.
        restricted = pod_security_labels(POD_SECURITY_LEVEL)
        kube.core.create_namespace({"metadata": {"name": SYSTEM_NS, "labels": restricted}})
        t0 = boottime()
        rel.helm(
            "install", RELEASE, str(CHART), "-n", SYSTEM_NS,
            "--wait", "--timeout", "2m", *rel.values(),
        )  # fmt: skip
        rel.timings["helm install --wait"] = boottime() - t0
        kube.core.create_namespace({"metadata": {"name": TEAM_NS, "labels": restricted}})
        wait_for(lambda: kube.core.read_namespaced_service_account("default", TEAM_NS), 30)
        manifests = "\n---\n".join(json.dumps(d) for d in example_docs())
        rel.kubectl(
            "apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "-n", TEAM_NS,
            "-f", "-", input=manifests,
        )  # fmt: skip
        first = example_docs()[0]
        wait_for(lambda: rel.ready(first), 60, interval=0.05, message=rel.operator_log)
        (pid,) = pod_pids(rel.running_operator())
        started = process_start(pid)
        rel.timings["helm install → operator process started"] = started - t0
        rel.timings["operator process start → first reconcile (cold)"] = boottime() - started
        for doc in example_docs():
            rel.wait_ready(doc["kind"], doc["metadata"]["name"])
        rel.timings["chart install → all examples Ready"] = boottime() - t0
        yield rel
    finally:
        print("\n".join(f"[helm install] {k}: {v:.2f}s" for k, v in rel.timings.items()))
        kube.close()
        cluster.stop()


OPERATOR_IMAGE_CURRENT = (
    image_status(Path(__file__).resolve().parents[2]).get(
        "ghcr.io/swarmkit-operator/swarmkit-operator:0.1.0"
    )
    == "ok"
)


def test_operator_pod_runs_from_the_chart_with_its_service_account(release: Release) -> None:
    pod = release.running_operator()
    assert pod.spec.service_account_name == DEPLOYMENT
    assert pod.spec.containers[0].image == "ghcr.io/swarmkit-operator/swarmkit-operator:0.1.0"
    (pid,) = pod_pids(pod)
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"swarmkit_operator" in cmdline  # the image's entry point, run by the process node
    env = dict(
        kv.split(b"=", 1) for kv in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if kv
    )
    assert b"KUBECONFIG" not in env  # in-cluster config: the projected service-account token
    assert env[b"KUBERNETES_SERVICE_HOST"] == b"127.0.0.1"
    if OPERATOR_IMAGE_CURRENT:  # the real image: its distroless root, its user
        assert os.readlink(f"/proc/{pid}/exe").startswith("/usr/bin/python3")
        assert not Path(f"/proc/{pid}/root/bin/sh").exists()  # distroless: no shell
        ids = {
            line.split(":")[0]: line.split()[1]
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith(("Uid:", "Gid:"))
        }
        assert ids == {"Uid": "65532", "Gid": "65532"}


def test_examples_and_a_run_succeed(release: Release) -> None:
    # (examples/ are Ready: the fixture waited for each, at its current generation.)
    run = example_run()

    def created() -> bool:
        # Right after the install the apiserver's MutatingAdmissionPolicy (run author) may
        # answer 503 "Resource kind ... Run not found" until its admission has the Runs CRD
        # (seconds; tests/integration/test_funnels.py waits for the policy the same way).
        try:
            release.kubectl("create", "-n", TEAM_NS, "-f", "-", input=json.dumps(run))
        except ClusterError as exc:
            if "ServiceUnavailable" in str(exc) and "Kind=Run not found" in str(exc):
                return False
            raise
        return True

    until(created, 60, message=release.operator_log)

    def finished() -> dict[str, Any] | None:
        obj = release.get("runs", run["metadata"]["name"])
        c = release.condition(obj, "Succeeded")
        return obj if c and c["status"] != "Unknown" else None

    obj = until(finished, 120, message=release.operator_log)
    cond = release.condition(obj, "Succeeded")
    assert cond and (cond["status"], cond["reason"]) == ("True", "Succeeded"), obj["status"]
    assert obj["status"]["output"]
    pod = release.kube.core.read_namespaced_pod(obj["status"]["podName"], TEAM_NS)
    assert pod.spec.automount_service_account_token is False


def test_the_operator_never_hit_a_forbidden(release: Release) -> None:
    pod = release.running_operator()
    log = release.cluster.pod_logs(SYSTEM_NS, pod.metadata.name, "operator")
    # kopf raises APIForbiddenError, the operator's client logs the apiserver's "Forbidden".
    assert "Forbidden" not in log, release.operator_log()
    metrics = _scrape(release.ports["metrics"])  # the pod shares the host's network
    requests = [line for line in metrics.splitlines() if line.startswith("swarmkit_api_requests")]
    assert requests, "no API request metrics"
    assert not [line for line in requests if 'code="403"' in line], requests


def _scrape(port: int) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def _scripts(release: Release) -> list[dict[str, Any]]:
    return list(release.get("skills", SCRIPT_SKILL)["status"].get("scripts") or [])


def _upgrade_and_wait(release: Release, allowed: list[dict[str, str]], expect: str) -> float:
    """helm upgrade with ``allowed``; wait for a new operator pod and the script's reason.

    Returns seconds from the new operator process's start to the Skill status change.
    """
    old = release.running_operator()
    release.helm(
        "upgrade", RELEASE, str(CHART), "-n", SYSTEM_NS, "--wait", "--timeout", "2m",
        *release.values(
            config={"security": {"skills": {"allowScriptExecution": True, "allowed": allowed}}}
        ),
    )  # fmt: skip

    def replaced() -> Any:
        pod = release.running_operator()
        return pod if pod.metadata.uid != old.metadata.uid else None

    new = until(replaced, 60, message="a new operator pod after the upgrade")
    (pid,) = pod_pids(new)
    started = process_start(pid)
    script = until(
        lambda: [s for s in _scripts(release) if s["reason"] == expect] or None,
        60,
        message=lambda: f"{SCRIPT_PATH} {expect}: {_scripts(release)}\n{release.operator_log()}",
    )
    assert script[0]["path"] == SCRIPT_PATH
    return boottime() - started


def test_upgrade_with_a_new_approval_restarts_the_operator_and_the_pin_takes_effect(
    release: Release,
) -> None:
    (before,) = _scripts(release)
    assert before["path"] == SCRIPT_PATH
    assert before["approved"] is False and before["reason"] == "ExecutionDisabled"
    pin = before["sha256"]
    entry = {"skill": SCRIPT_SKILL, "path": SCRIPT_PATH, "sha256": pin}
    release.timings["operator pod start → first reconcile (approval)"] = _upgrade_and_wait(
        release, [entry], "Approved"
    )
    assert _scripts(release)[0]["approved"] is True
    # A pin that no longer matches the content: the script is refused again.
    wrong = {**entry, "sha256": "0" * 64}
    release.timings["operator pod start → first reconcile (pin mismatch)"] = _upgrade_and_wait(
        release, [wrong], "PinMismatch"
    )
    assert _scripts(release)[0]["approved"] is False
    skill = release.get("skills", SCRIPT_SKILL)
    approved = release.condition(skill, "ScriptsApproved")
    assert approved and approved["status"] == "False" and SCRIPT_PATH in approved["message"]
    config = yaml.safe_load(
        release.kubectl(
            "get", "configmap", f"{DEPLOYMENT}-config", "-n", SYSTEM_NS,
            "-o", "jsonpath={.data.config\\.yaml}",
        )
    )  # fmt: skip
    assert config["security"]["skills"]["allowed"] == [wrong]


def test_kubectl_swarmkit_pin_output_is_accepted_by_helm_upgrade_and_approves(
    release: Release, tmp_path: Path
) -> None:
    """`kubectl swarmkit pin skill/NAME` prints values `helm upgrade -f` takes as they are."""
    (script,) = _scripts(release)
    env = {**os.environ, "KUBECONFIG": str(release.cluster.kubeconfig), "NO_COLOR": "1"}
    cli = Path(sys.executable).parent / "kubectl-swarmkit"
    res = subprocess.run(
        [str(cli), "pin", f"skill/{SCRIPT_SKILL}", "-n", TEAM_NS],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    pin = tmp_path / "pin.yaml"
    pin.write_text(res.stdout)
    allowed = yaml.safe_load(res.stdout)["config"]["security"]["skills"]["allowed"]
    assert allowed == [
        {
            "namespace": TEAM_NS,
            "skill": SCRIPT_SKILL,
            "path": SCRIPT_PATH,
            "sha256": script["sha256"],
        }
    ]
    old = release.running_operator()
    release.helm(
        "upgrade", RELEASE, str(CHART), "-n", SYSTEM_NS, "--wait", "--timeout", "2m",
        *release.values(), "-f", str(pin),
    )  # fmt: skip

    def replaced() -> Any:
        pod = release.running_operator()
        return pod if pod.metadata.uid != old.metadata.uid else None

    until(replaced, 60, message="a new operator pod after the upgrade")
    until(
        lambda: [s for s in _scripts(release) if s["reason"] == "Approved"] or None,
        60,
        message=lambda: f"{SCRIPT_PATH} Approved: {_scripts(release)}\n{release.operator_log()}",
    )
    assert _scripts(release)[0]["approved"] is True


def test_two_replicas_elect_one_leader_and_only_it_writes(release: Release) -> None:
    # The process node shares the host's network: two replicas cannot both bind the health
    # and metrics ports, so this test switches both endpoints off.
    release.helm(
        "upgrade", RELEASE, str(CHART), "-n", SYSTEM_NS, "--wait", "--timeout", "2m",
        *release.values(
            replicaCount=2,
            extraArgs=["--liveness=", "--metrics-port=0"],
            extraEnv=[{"name": "SWARMKIT_LOG_HANDLER_SUCCESS", "value": "1"}],
        ),
    )  # fmt: skip
    release.kubectl("rollout", "status", f"deployment/{DEPLOYMENT}", "-n", SYSTEM_NS)

    def leader_and_standby() -> tuple[str, str] | None:
        pods = {p.metadata.name for p in release.operator_pods() if p.status.phase == "Running"}
        if len(pods) != 2:
            return None
        leases = kubernetes.client.CoordinationV1Api(release.kube.api_client)
        lease = leases.read_namespaced_lease(DEPLOYMENT, SYSTEM_NS)
        holder = str(lease.spec.holder_identity or "")
        leader = holder.rsplit("_", 1)[0]
        if leader not in pods:
            return None
        standby = next(iter(pods - {leader}))
        if "standing by" not in release.cluster.pod_logs(SYSTEM_NS, standby, "operator"):
            return None
        return leader, standby

    leader, standby = until(leader_and_standby, 90, message="one leader and one standby")
    probe = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Skill",
        "metadata": {"name": "leader-probe"},
        "spec": {
            "description": "Use when checking that exactly one operator replica writes.",
            "category": "capability",
            "instructions": "Nothing to do.",
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    }
    release.kubectl("apply", "--server-side", "-n", TEAM_NS, "-f", "-", input=json.dumps(probe))
    release.wait_ready("Skill", "leader-probe")
    standby_log = release.cluster.pod_logs(SYSTEM_NS, standby, "operator")
    assert "writers started" in release.cluster.pod_logs(SYSTEM_NS, leader, "operator")
    assert "writers started" not in standby_log
    assert "not the leader" not in standby_log  # it never even tried to write


def test_uninstall_keeps_crds_and_users_objects(release: Release) -> None:
    release.helm("uninstall", RELEASE, "-n", SYSTEM_NS, "--wait", "--timeout", "2m")
    wait_for(lambda: not release.operator_pods(), 60, message="operator pods gone")
    crds = release.kubectl("get", "crd", "-o", "name").split()
    for plural in ("workspaces", "skills", "agents", "topologies", "runs"):
        assert f"customresourcedefinition.apiextensions.k8s.io/{plural}.swarmkit.dev" in crds
    for doc in example_docs():
        obj = release.get(PLURALS[doc["kind"]], doc["metadata"]["name"])
        assert release.condition(obj, "Ready"), doc["metadata"]["name"]
    assert release.get("runs", example_run()["metadata"]["name"])
    rendered = release.kubectl("get", "configmaps", "-n", TEAM_NS, "-o", "name")
    assert f"configmap/skill-{SCRIPT_SKILL}-" in rendered  # owned by the Skill, which stays
    gone = release.kubectl(
        "get", "deployments,serviceaccounts,configmaps", "-n", SYSTEM_NS, "-o", "name",
        "-l", f"app.kubernetes.io/instance={RELEASE}",
    )  # fmt: skip
    assert gone.strip() == ""
    assert DEPLOYMENT not in release.kubectl("get", "clusterroles", "-o", "name")


def test_reinstall_watching_one_namespace_adopts_the_kept_crds(release: Release) -> None:
    """After the uninstall: install again, namespaced (Roles, not a ClusterRole). The kept
    CRDs are adopted, the operator works in the watched namespace with only its Role, and
    leaves every other namespace alone."""
    for ns in ("team-b", "team-c"):
        release.kube.core.create_namespace({"metadata": {"name": ns}})
    wait_for(
        lambda: all(
            release.kube.core.read_namespaced_service_account("default", ns)
            for ns in ("team-b", "team-c")
        ),
        30,
    )
    t0 = time.monotonic()
    release.helm(
        "install", RELEASE, str(CHART), "-n", SYSTEM_NS, "--wait", "--timeout", "2m",
        *release.values(watchNamespaces=["team-b"]),
    )  # fmt: skip
    roles = release.kubectl(
        "get", "roles", "-A", "-o", "custom-columns=NS:.metadata.namespace,NAME:.metadata.name",
        "--no-headers", "-l", "app.kubernetes.io/instance=sk",
    )  # fmt: skip
    # the watched namespace's Role, and the leader election's in the release namespace
    assert sorted(tuple(line.split()) for line in roles.splitlines()) == [
        (SYSTEM_NS, f"{DEPLOYMENT}-leader-election"),
        ("team-b", DEPLOYMENT),
    ]
    workspace = next(d for d in example_docs() if d["kind"] == "Workspace")
    for ns in ("team-b", "team-c"):
        release.kubectl("apply", "--server-side", "-n", ns, "-f", "-", input=json.dumps(workspace))
    name = workspace["metadata"]["name"]
    until(
        lambda: release.with_condition("workspaces", name, "Ready", ns="team-b"),
        60,
        message=release.operator_log,
    )
    release.timings["reinstall (CRDs kept) → a Workspace Ready"] = time.monotonic() - t0
    time.sleep(2)  # the operator had every chance to touch team-c
    assert "status" not in release.get("workspaces", name, ns="team-c")
    assert "Forbidden" not in release.operator_log()
