"""Helpers for the end-to-end tests: the operator as a real process, manifests, waits, the CLI.

The operator runs as ``python -m swarmkit_operator`` (or ``kopf run -m
swarmkit_operator.handlers`` while there is no entry point) against the test cluster, so a
test can SIGKILL it mid-run and start it again. Runs execute the real runner in the process
node (image ``*swarmkit-runtime`` → ``python -m swarmkit_runner``).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.identity import NAMESPACE as IDENTITY_NAMESPACE
from swarmkit_devcluster.identity import chart_operator_kubeconfig, rbac_denials
from swarmkit_devcluster.testing import Kube, wait_for

REPO = Path(__file__).resolve().parents[2]
GROUP, VERSION = "swarmkit.dev", "v1alpha1"
PLURALS = {
    "Workspace": "workspaces",
    "Skill": "skills",
    "Agent": "agents",
    "Topology": "topologies",
    "Run": "runs",
    "Funnel": "funnels",
    "SpendQuota": "spendquotas",
    "Review": "reviews",
    "EvalSet": "evalsets",
    "EvalRun": "evalruns",
}


#: Lease timings of the tests' operators: the chart's shape, shorter, so a test that
#: SIGKILLs the operator and starts it again waits ~4 s for the Lease, not 12. The HA chaos
#: test uses the chart's defaults.
TEST_LEASE = {
    "SWARMKIT_LEASE_DURATION": "4",
    "SWARMKIT_RENEW_DEADLINE": "3",
    "SWARMKIT_RETRY_PERIOD": "1",
}


class OperatorProcess:
    """The operator as a child process (own process group), with its log in a file.

    It runs as the Helm chart deploys it: with the chart's ServiceAccount and RBAC
    (:func:`swarmkit_devcluster.identity.chart_operator_kubeconfig`), leader election on,
    its Lease in the chart's namespace. :meth:`stop` fails the test when the apiserver
    refused any of its requests (HTTP 403): the chart must grant what the code does.
    """

    def __init__(
        self,
        kubeconfig: Path,
        config: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        identity: Path | None = None,
    ) -> None:
        """``identity``: a kubeconfig of another release's ServiceAccount (e.g. one installed
        with ``watchNamespaces``); by default the chart's, as installed cluster-wide."""
        self.extra_env = dict(env or {})
        self.admin_kubeconfig = kubeconfig
        self.dir = Path(tempfile.mkdtemp(prefix="swarmkit-operator-test-"))
        self.log_path = self.dir / "operator.log"
        self.config_path = self.dir / "config.yaml"
        self.config_path.write_text(yaml.safe_dump(config or {}))
        self.kubeconfig = identity or chart_operator_kubeconfig(kubeconfig)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        #: Like a pod's ``restartPolicy: Always``: an operator that exits by itself (e.g. a
        #: leader that could not renew its Lease while the apiserver restarted) is started
        #: again, as the kubelet would. A test that expects the exit turns this off.
        self.restart = True
        self.restarts = 0
        #: Fail the test on an RBAC denial in the log (:meth:`stop`). Off only where the
        #: apiserver itself restarts: its authorizer denies everything until its caches
        #: fill, and the operator's streams retry.
        self.check_denials = True
        self._lock = threading.RLock()
        self._supervisor: threading.Thread | None = None

    def command(self) -> list[str]:
        if importlib.util.find_spec("swarmkit_operator.__main__") is not None:
            return [sys.executable, "-m", "swarmkit_operator"]
        return [
            sys.executable,
            "-m",
            "kopf",
            "run",
            "--standalone",
            "--all-namespaces",
            "-m",
            "swarmkit_operator.handlers",
        ]

    def start(self) -> None:
        with self._lock:
            self._spawn()
        if self._supervisor is None:
            self._supervisor = threading.Thread(target=self._supervise, daemon=True)
            self._supervisor.start()
        wait_for(
            lambda: "swarmkit-operator started" in self.log().rsplit("===== start #", 1)[-1],
            30,
            message=lambda: f"the operator to start; log:\n{self.tail()}",
        )

    def _supervise(self) -> None:
        while True:
            time.sleep(0.5)
            with self._lock:
                proc = self.proc
                if proc is None or proc.poll() is None or not self.restart:
                    continue
                self.restarts += 1
                self._spawn(f"exited with {proc.returncode}; restarted like the kubelet would")

    def _spawn(self, why: str = "") -> None:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "SWARMKIT_OPERATOR_CONFIG": str(self.config_path),
            "PYTHONUNBUFFERED": "1",
            "SWARMKIT_METRICS_PORT": "0",
            "SWARMKIT_LIVENESS": "",
            "SWARMKIT_LEADER_ELECT": "true",
            "POD_NAMESPACE": IDENTITY_NAMESPACE,
            **TEST_LEASE,
            **self.extra_env,
        }
        self.starts += 1
        log = self.log_path.open("ab")
        log.write(f"\n===== start #{self.starts} ===== {why}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
        log.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group (no graceful shutdown); not restarted."""
        with self._lock:
            if self.proc is None:
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The operator frozen (SIGSTOP to its process group) for the block, then resumed:
        what others do meanwhile happens while it looks away, as when they win a race
        against its next reconcile. Its watches deliver what it missed once resumed."""
        assert self.proc is not None, "the operator is not running"
        os.killpg(self.proc.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.killpg(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        with self._lock:
            if self.proc is None:
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
            self.proc = None
        denied = self.denials() if self.check_denials else []
        assert not denied, "the chart's RBAC refused the operator:\n" + "\n".join(denied[:10])

    def denials(self) -> list[str]:
        """Log lines of requests the chart's RBAC refused."""
        return rbac_denials(self.log())

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])


#: The runtime image the operator runs Runs in (``make images`` builds it).
RUNTIME = "ghcr.io/swarmkit-operator/swarmkit-runtime:0.1.0"
#: The installed ``kubectl swarmkit`` plugin, next to this interpreter.
CLI = str(Path(sys.executable).parent / "kubectl-swarmkit")


#: The Chromium the web-view tests drive through Playwright (``make venv`` installs it).
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def cli_env(cluster: LocalCluster) -> dict[str, str]:
    return {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "NO_COLOR": "1"}


def cli(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl swarmkit`` (the installed plugin) against the test cluster."""
    return subprocess.run(
        [CLI, *args], capture_output=True, text=True, env=cli_env(cluster), timeout=120,
        check=False,
    )  # fmt: skip


def cli_module(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m swarmkit_cli --kubeconfig <the test cluster's>`` from the repository root."""
    cmd = [sys.executable, "-m", "swarmkit_cli", "--kubeconfig", str(cluster.kubeconfig), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO, check=False)


def examples() -> list[dict[str, Any]]:
    docs = []
    for path in sorted((REPO / "examples").glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def example(kind: str, name: str | None = None) -> dict[str, Any]:
    for doc in examples():
        if doc["kind"] == kind and (name is None or doc["metadata"]["name"] == name):
            return copy.deepcopy(doc)
    raise KeyError((kind, name))


def doc(kind: str, name: str, spec: dict[str, Any], **labels: str) -> dict[str, Any]:
    """A manifest of ``kind`` in the SwarmKit group: the one way tests build one by hand.
    ``labels``: ``metadata.labels`` (left out when there are none)."""
    meta: dict[str, Any] = {"name": name, "labels": labels} if labels else {"name": name}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": meta, "spec": spec}


def create(kube: Kube, namespace: str, doc: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(doc)
    body.setdefault("metadata", {})["namespace"] = namespace
    body["metadata"].pop("resourceVersion", None)
    out: dict[str, Any] = kube.custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURALS[body["kind"]], body
    )
    return out


def apply(kube: Kube, namespace: str, doc: dict[str, Any]) -> dict[str, Any]:
    """Create, or replace the spec of an existing object."""
    from kubernetes.client.exceptions import ApiException

    try:
        return create(kube, namespace, doc)
    except ApiException as exc:
        if exc.status != 409:
            raise
    plural = PLURALS[doc["kind"]]
    name = doc["metadata"]["name"]
    out: dict[str, Any] = kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, plural, name, {"spec": doc["spec"]}
    )
    return out


def apply_examples(
    kube: Kube,
    namespace: str,
    edit: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
) -> None:
    for doc in examples():
        if doc["kind"] in ("Run", "EvalRun"):  # both start Runs: a test makes its own
            continue
        doc = edit(doc) if edit else doc
        if doc is not None:
            apply(kube, namespace, doc)


def with_command(
    pack: str, name: str, description: str, code: str, effects: str
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An ``apply_examples`` edit: the Workspace gains command pack ``pack`` with one
    command ``name`` that runs ``python -c code`` (``effects``: read | write)."""
    command = {
        "name": name,
        "description": description,
        "argv": ["python", "-c", code],
        "effects": effects,
    }

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Workspace":
            packs = doc["spec"].get("commandPacks", [])
            new = {"id": pack, "requires": ["python"], "commands": [dict(command)]}
            doc["spec"]["commandPacks"] = [*packs, new]
        return doc

    return edit


def with_mailbox(doc: dict[str, Any]) -> dict[str, Any]:
    """An ``apply_examples`` edit: the Workspace gains the mailbox ``ops`` (on-call humans)."""
    if doc["kind"] == "Workspace":
        doc["spec"]["mailboxes"] = [{"name": "ops", "description": "on-call humans"}]
    return doc


def sha256_hex(text: str) -> str:
    """The digest an operator config's ``security.skills.allowed`` entry pins a script by."""
    return hashlib.sha256(text.encode()).hexdigest()


def get(kube: Kube, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    from kubernetes.client.exceptions import ApiException

    try:
        out: dict[str, Any] = kube.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURALS[kind], name
        )
        return out
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def succeeded(run: dict[str, Any] | None) -> dict[str, Any] | None:
    for cond in ((run or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Succeeded":
            return dict(cond)
    return None


def run_manifest(
    name: str,
    topology: str | None = "review-pipeline",
    *,
    agent: str | None = None,
    input: str = "Review PR #42.",
    timeout: int | None = 120,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"input": input, **spec}
    if agent:
        body["agentRef"] = {"name": agent}
    else:
        body["topologyRef"] = {"name": topology}
    if timeout is not None:
        body["timeoutSeconds"] = timeout
    return doc("Run", name, body)


def jobs(kube: Kube, namespace: str) -> list[Any]:
    return list(kube.batch.list_namespaced_job(namespace).items)


def pods(kube: Kube, namespace: str) -> list[Any]:
    return list(kube.core.list_namespaced_pod(namespace).items)


def debug(kube: Kube, namespace: str, operator: OperatorProcess | None = None) -> str:
    parts = []
    with contextlib.suppress(Exception):
        runs = kube.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "runs")
        for r in runs["items"]:
            parts.append(f"run {r['metadata']['name']}: {json.dumps(r.get('status'), indent=1)}")
    with contextlib.suppress(Exception):
        for kind in ("Workspace", "Skill", "Agent", "Topology"):
            items = kube.custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURALS[kind]
            )["items"]
            for o in items:
                conds = [
                    (c["type"], c["status"], c.get("reason"), c.get("message"))
                    for c in (o.get("status") or {}).get("conditions") or ()
                ]
                parts.append(f"{kind} {o['metadata']['name']}: {conds}")
    with contextlib.suppress(Exception):
        for j in jobs(kube, namespace):
            conds = [(c.type, c.status, c.reason) for c in j.status.conditions or ()]
            parts.append(
                f"job {j.metadata.name}: deleting={bool(j.metadata.deletion_timestamp)} "
                f"finalizers={j.metadata.finalizers} {conds}"
            )
    with contextlib.suppress(Exception):
        for p in pods(kube, namespace):
            states = [
                (c.name, c.state.to_dict() if c.state else None)
                for c in p.status.container_statuses or ()
            ]
            parts.append(
                f"pod {p.metadata.name}: {p.status.phase} "
                f"deleting={bool(p.metadata.deletion_timestamp)} "
                f"finalizers={p.metadata.finalizers} {states}"
            )
    if operator is not None:
        lines = [
            line
            for line in operator.log().splitlines()
            if "Request attempt" not in line and "being terminated" not in line
        ]
        parts.append("--- operator log ---\n" + "\n".join(lines[-60:]))
    return "\n".join(parts)


def wait_run(
    kube: Kube,
    namespace: str,
    name: str,
    predicate: Callable[[dict[str, Any]], bool],
    timeout: float = 90,
    operator: OperatorProcess | None = None,
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        run = get(kube, namespace, "Run", name)
        return run if run is not None and predicate(run) else None

    result: dict[str, Any] = wait_for(
        check, timeout, message=lambda: debug(kube, namespace, operator)
    )
    return result


def reason_is(*reasons: str) -> Callable[[dict[str, Any]], bool]:
    def check(run: dict[str, Any]) -> bool:
        cond = succeeded(run)
        return cond is not None and cond.get("reason") in reasons

    return check


def finished(run: dict[str, Any]) -> bool:
    cond = succeeded(run)
    return cond is not None and cond.get("status") in ("True", "False")


def wait_ready(kube: Kube, namespace: str, kind: str, name: str, timeout: float = 60) -> None:
    """Wait for ``Ready=True``; for an Agent, also until it has picked up every granted skill
    that is Ready by now. An Agent is Ready with a granted skill missing or not Ready (inert
    until it appears), so a Skill applied just before it can render after it: a Run created
    on the Agent's first Ready would then run without that skill (only an Agent's status
    has ``missingSkills``)."""

    def check() -> bool:
        obj = get(kube, namespace, kind, name)
        if not _is_ready(obj):
            return False
        missing = ((obj or {}).get("status") or {}).get("missingSkills") or ()
        return not any(_is_ready(get(kube, namespace, "Skill", str(s))) for s in missing)

    wait_for(check, timeout, message=lambda: debug(kube, namespace))


def _is_ready(obj: dict[str, Any] | None) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def warning_event(kube: Kube, namespace: str, name: str, reason: str) -> str:
    """The message of the Warning Event ``reason`` on object ``name``, once there is one."""

    def found() -> str | None:
        for e in kube.core.list_namespaced_event(namespace).items:
            if e.involved_object.name == name and e.reason == reason and e.type == "Warning":
                return str(e.message)
        return None

    message: str = wait_for(found, 30, message=f"a Warning {reason} Event on {name}")
    return message


def epoch(timestamp: str) -> float:
    """An RFC 3339 timestamp of the apiserver (``...Z``), as epoch seconds."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


@contextlib.contextmanager
def timer() -> Iterator[Callable[[], float]]:
    start = time.monotonic()
    yield lambda: time.monotonic() - start


def agent_with(
    name: str, replay: list[dict[str, Any]], *, bash: bool = False, **spec: Any
) -> dict[str, Any]:
    """A single-agent manifest with scripted replay turns."""
    body: dict[str, Any] = {
        "workspaceRef": {"name": "default"},
        "model": {"provider": "replay"},
        "systemPrompt": "You are a test agent.",
        "replay": replay,
        **spec,
    }
    if bash:
        body["nativeTools"] = {"bash": True}
    return doc("Agent", name, body)
