"""Leader election against the real apiserver: the Lease, the standby, the fence.

In-process electors (:mod:`swarmkit_operator.runtime.leader`) with the chart's identity
show client-go's rules on a real Lease: one leader, a standby that takes over only once
the Lease expired (or at once when it is released), and a leader whose writes are fenced
before a standby can take over. Then two operator processes as the chart runs them: the
leader's renewals are refused (its Lease RoleBinding deleted, while every other write of
it would still be allowed): it stops writing and exits before the other replica acquires
the Lease, and the other replica reconciles from then on.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from swarmkit_devcluster.cluster import LocalCluster, write_kubeconfig
from swarmkit_devcluster.identity import NAMESPACE, RELEASE, chart_operator_kubeconfig
from swarmkit_devcluster.testing import Kube, wait_for
from swarmkit_operator import k8s
from swarmkit_operator.runtime.leader import LeaderElector, Leadership, LeaseSettings

from .runs_support import OperatorProcess

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"


@pytest.fixture
async def client(cluster: LocalCluster) -> AsyncIterator[None]:
    """The operator's API client with the chart's ServiceAccount token."""
    k8s.shutdown()
    k8s.configure(kubeconfig=str(chart_operator_kubeconfig(cluster.kubeconfig)))
    yield
    k8s.set_write_gate(None)
    await k8s.close_connections()
    k8s.shutdown()


class Candidate:
    """One elector and what happened to it."""

    def __init__(self, name: str, lease: str, timings: tuple[float, float, float]) -> None:
        duration, deadline, retry = timings
        self.settings = LeaseSettings(
            lease, NAMESPACE, f"{name}_{uuid.uuid4()}", duration, deadline, retry
        )
        self.leadership = Leadership()
        self.started_at: float | None = None
        self.lost_at: float | None = None
        self.elector = LeaderElector(self.settings, self.leadership, self._started, self._lost)
        self.task: asyncio.Task[None] | None = None

    async def _started(self) -> None:
        self.started_at = time.monotonic()

    def _lost(self) -> None:
        self.lost_at = time.monotonic()

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.elector.run())

    async def crash(self) -> None:
        """Stop without releasing the Lease (as a SIGKILL would)."""
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def until(predicate: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s")
        await asyncio.sleep(0.05)


TIMINGS = (3.0, 2.0, 0.5)  # lease duration, renew deadline, retry period


async def test_one_leader_and_a_standby_that_waits_for_the_lease_to_expire(
    client: None, crds: Any
) -> None:
    # The chart's Role lets the operator get and update only the Lease it names.
    lease = RELEASE
    a, b = Candidate("a", lease, TIMINGS), Candidate("b", lease, TIMINGS)
    a.start()
    await until(lambda: a.started_at is not None, 15)  # a test's SIGKILLed operator: ≤ 4 s
    b.start()
    await asyncio.sleep(2 * TIMINGS[0])  # two lease durations: a renews, b stays out
    assert b.started_at is None and not b.leadership.leading
    assert b.leadership.write_refusal() == "not the leader (a standby replica writes nothing)"
    assert a.leadership.write_refusal() is None
    status, record = await k8s.request("GET", f"{LEASES.format(ns=NAMESPACE)}/{lease}")
    assert status == 200 and record["spec"]["holderIdentity"] == a.settings.identity
    assert record["spec"]["leaseDurationSeconds"] == 3
    transitions = record["spec"]["leaseTransitions"]

    await a.crash()
    crashed = time.monotonic()
    await until(lambda: b.started_at is not None, 3 * TIMINGS[0])
    assert b.started_at is not None
    takeover = b.started_at - crashed
    # b waits until it has seen the record unchanged for a whole lease duration
    assert TIMINGS[0] - TIMINGS[2] <= takeover <= TIMINGS[0] + 3 * TIMINGS[2], takeover
    # the crashed leader's fence fell before b could lead: never two writers
    assert a.leadership.fenced_at < b.started_at
    assert a.leadership.write_refusal() is not None
    status, record = await k8s.request("GET", f"{LEASES.format(ns=NAMESPACE)}/{lease}")
    assert record["spec"]["holderIdentity"] == b.settings.identity
    assert record["spec"]["leaseTransitions"] == transitions + 1
    await b.elector.release()
    await b.crash()


async def test_a_released_lease_is_taken_at_once(client: None, crds: Any) -> None:
    a, b = Candidate("a", RELEASE, TIMINGS), Candidate("b", RELEASE, TIMINGS)
    a.start()
    await until(lambda: a.started_at is not None, 15)
    b.start()
    await asyncio.sleep(1.0)
    released = time.monotonic()
    await a.elector.release()  # a graceful stop (a rolling update)
    await a.crash()
    assert a.leadership.write_refusal() is not None  # it stopped writing first
    await until(lambda: b.started_at is not None, 5)
    assert b.started_at is not None and b.started_at - released < 2 * TIMINGS[2] + 1.5
    await b.elector.release()
    await b.crash()


def test_unsafe_timings_are_refused() -> None:
    assert LeaseSettings("l", "ns", "me", 8, 8, 2).problems() == [
        "lease duration must exceed the renew deadline"
    ]
    assert (
        "renew deadline must exceed 1.2 x the retry period"
        in LeaseSettings("l", "ns", "me", 12, 2, 2).problems()
    )


# --- two operator processes: the leader's renewals refused -----------------------------------


def second_identity(cluster: LocalCluster, kube: Kube, name: str) -> tuple[Path, str]:
    """A second ServiceAccount bound to the chart's roles (its own RoleBinding for the
    Lease, so a test can take the Lease away from it alone); its kubeconfig."""
    chart_operator_kubeconfig(cluster.kubeconfig)  # the chart's roles exist
    binding = f"{name}-leader-election"
    docs = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{NAMESPACE}-{name}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": RELEASE},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": f"{RELEASE}-leader-election"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}],
        },
    ]  # fmt: skip
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps({"apiVersion": "v1",
                    "kind": "List", "items": docs}))  # fmt: skip
    token = kube.core.create_namespaced_service_account_token(
        name, NAMESPACE, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    admin = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]
    path = cluster.kubeconfig.with_name(f"{name}.kubeconfig")
    ca = base64.b64decode(admin["certificate-authority-data"]).decode()
    write_kubeconfig(path, admin["server"], ca, token, name)
    return path, binding


@pytest.fixture
def replicas(cluster: LocalCluster, kube: Kube, crds: Any) -> Iterator[list[OperatorProcess]]:
    made = []
    for name in ("a", "b"):
        op = OperatorProcess(
            cluster.kubeconfig,
            env={"POD_NAME": f"replica-{name}", "SWARMKIT_LOG_FORMAT": "plain"},
        )
        made.append(op)
    yield made
    for op in made:
        with contextlib.suppress(AssertionError):
            op.stop()


def skill(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Skill",
        "metadata": {"name": name},
        "spec": {
            "description": f"Use when {name} comes up.",
            "category": "capability",
            "instructions": "Nothing to do.",
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    }


def ready(kube: Kube, ns: str, name: str) -> bool:
    obj = kube.custom.get_namespaced_custom_object("swarmkit.dev", "v1alpha1", ns, "skills", name)
    conds = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def test_a_leader_whose_renewals_fail_stops_writing_before_the_lease_expires(
    cluster: LocalCluster, kube: Kube, namespace: str, replicas: list[OperatorProcess]
) -> None:
    a, b = replicas
    a.restart = False  # this test expects it to exit
    a.kubeconfig, binding = second_identity(cluster, kube, "operator-a")
    a.start()
    wait_for(lambda: "writers started" in a.log(), 30, message=a.tail)
    b.start()
    wait_for(lambda: "standing by" in b.log(), 30, message=b.tail)
    kube.custom.create_namespaced_custom_object(
        "swarmkit.dev", "v1alpha1", namespace, "skills", skill("before")
    )
    wait_for(lambda: ready(kube, namespace, "before"), 30, message=a.tail)

    # The apiserver stops answering a's renewals (403); its other writes would still pass.
    kube.rbac.delete_namespaced_role_binding(binding, NAMESPACE)
    cut = time.time()
    assert a.proc is not None
    wait_for(lambda: a.proc is not None and a.proc.poll() is not None, 30, interval=0.05,
             message=a.tail)  # fmt: skip
    exited = time.time()
    assert "lost the lease" in a.log() and "stopped writing" in a.log()
    wait_for(lambda: "acquired the lease" in b.log(), 30, message=b.tail)
    lease = kubernetes.client.CoordinationV1Api(kube.api_client).read_namespaced_lease(
        RELEASE, NAMESPACE
    )
    acquired: datetime = lease.spec.acquire_time
    assert str(lease.spec.holder_identity).startswith("replica-b_")
    # a left (its fence: renew deadline 3 s) before b could take the Lease (duration 4 s)
    assert exited < acquired.timestamp(), (cut, exited, acquired)
    assert exited - cut < 3.0 + 1.5
    kube.custom.create_namespaced_custom_object(
        "swarmkit.dev", "v1alpha1", namespace, "skills", skill("after")
    )
    wait_for(lambda: ready(kube, namespace, "after"), 30, message=b.tail)
    a.proc = None  # it exited by itself


def test_a_graceful_stop_writes_the_skill_library_before_handing_the_lease_over(
    cluster: LocalCluster, kube: Kube, namespace: str, replicas: list[OperatorProcess]
) -> None:
    """A rolling update stops the leader with SIGTERM: what it has not written yet (here
    the skill library's record of a new Skill, its flushes an hour apart) is written while
    it still leads. The hand-over came first before, and the write gate refused the last
    flush ("not the leader"): the library lost its last changes on every rolling update."""
    a = OperatorProcess(
        cluster.kubeconfig,
        env={"POD_NAME": "replica-a", "SWARMKIT_LOG_FORMAT": "plain",
             "SWARMKIT_LIBRARY_FLUSH_SECONDS": "3600"},
    )  # fmt: skip
    replicas.append(a)
    a.start()
    wait_for(lambda: "writers started" in a.log(), 30, message=a.tail)
    kube.custom.create_namespaced_custom_object(
        "swarmkit.dev", "v1alpha1", namespace, "skills", skill("recorded")
    )
    wait_for(lambda: ready(kube, namespace, "recorded"), 30, message=a.tail)
    assert not kube.core.list_namespaced_config_map(
        namespace, label_selector="swarmkit.dev/skill-library=true"
    ).items  # not flushed yet
    a.stop()
    assert "not the leader" not in a.log(), a.tail()
    maps = kube.core.list_namespaced_config_map(
        namespace, label_selector="swarmkit.dev/skill-library=true"
    ).items
    assert len(maps) == 1, a.tail()
    assert "recorded" in json.loads(maps[0].data["library.json"])["skills"]
