"""The real node (issue 38): a kubelet + containerd + runc node beside the process node, where a
kernel boundary is the point. Marked ``real_node``; needs a cluster started with
``REAL_NODE=1 make cluster-up`` (root, ``make node-binaries``). A cluster without the real node
fails these tests with the reason, never skips them silently.

Pods land on the node through its taint's toleration and a nodeSelector; they use the
``busybox`` image the node imports (user 65532), with ``imagePullPolicy: Never``.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from kubernetes.client import NetworkingV1Api

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.realnode import GUARD_CHAIN, NODE_NAME, TAINT_KEY
from swarmkit_devcluster.realnode_images import BUSYBOX_REF
from swarmkit_devcluster.testing import Kube, wait_for

pytestmark = pytest.mark.real_node


def require_image(cluster: LocalCluster, ref: str) -> None:
    """Fail (with what to do) unless the real node imported ``ref`` built from this checkout."""
    if ref not in cluster.state.get("real_node_images", []):
        pytest.fail(
            f"the real node has no {ref} built from this checkout's sources: `make images`, "
            "then start the cluster again (another worktree may have rebuilt the shared "
            "image store before this cluster imported it)",
            pytrace=False,
        )


def pod_on_real_node(
    name: str, command: str, *, memory: str = "64Mi", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Pod Security ``restricted`` pod pinned to the real node."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
            "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX_REF,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", command],
                    "resources": {"limits": {"memory": memory, "cpu": "200m"}},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def finished(kube: Kube, ns: str, name: str, timeout: float = 60) -> Any:
    """The pod once it ended (Succeeded or Failed)."""
    return wait_for(
        lambda: (
            (p := kube.core.read_namespaced_pod(name, ns)).status.phase in ("Succeeded", "Failed")
            and p
        ),
        timeout,
        message=lambda: str(kube.core.read_namespaced_pod(name, ns).status),
    )


def test_restricted_pod_runs_as_its_user_read_only_with_seccomp(
    real_node: str, kube: Kube, namespace: str
) -> None:
    cmd = "id -u; touch /probe 2>&1; grep -E '^(Seccomp|NoNewPrivs|CapEff):' /proc/self/status"
    kube.core.create_namespaced_pod(namespace, pod_on_real_node("probe", cmd))
    pod = finished(kube, namespace, "probe")
    assert pod.spec.node_name == real_node
    out = kube.core.read_namespaced_pod_log("probe", namespace)
    lines = out.splitlines()
    assert lines[0] == "65532", out
    assert "Read-only file system" in out, out
    assert "Seccomp:\t2" in out, out  # filter mode: RuntimeDefault is really applied
    assert "NoNewPrivs:\t1" in out, out
    assert "CapEff:\t0000000000000000" in out, out


def test_memory_limit_oom_kills(real_node: str, kube: Kube, namespace: str) -> None:
    # The shell holds a 100 MB string: more than the 32 Mi the cgroup allows.
    cmd = "x=$(head -c 100000000 /dev/zero | tr '\\0' x); echo survived ${#x}"
    kube.core.create_namespaced_pod(namespace, pod_on_real_node("hog", cmd, memory="32Mi"))
    pod = finished(kube, namespace, "hog")
    term = pod.status.container_statuses[0].state.terminated
    assert (term.reason, term.exit_code) == ("OOMKilled", 137), term


def guard_drops() -> int:
    """Packets the leak guard's DROP rule (raw table) has dropped so far."""
    out = subprocess.run(
        ["iptables", "-t", "raw", "-L", GUARD_CHAIN, "-v", "-x", "-n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    drop = [ln.split() for ln in out.splitlines() if " DROP " in f" {ln} "]
    return int(drop[0][0])


def test_traffic_to_an_outside_address_is_dropped_on_the_bridge(
    real_node: str, kube: Kube, namespace: str
) -> None:
    before = guard_drops()
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): never a real host. nc's complaint goes to stdout
    # too: the runtime copies a container's stdout and stderr from two pipes into one log,
    # so a stderr line can land after a later stdout line (13 % of pairs, measured here).
    cmd = "nc -w 3 192.0.2.1 80 </dev/null 2>&1 && echo CONNECTED || echo BLOCKED"
    kube.core.create_namespaced_pod(namespace, pod_on_real_node("leak", cmd))
    finished(kube, namespace, "leak")
    assert kube.core.read_namespaced_pod_log("leak", namespace).splitlines()[-1] == "BLOCKED"
    assert guard_drops() > before  # dropped by the guard, not merely unanswered


def running_ip(kube: Kube, ns: str, name: str) -> str:
    pod = wait_for(
        lambda: (p := kube.core.read_namespaced_pod(name, ns)).status.phase == "Running" and p,
        60,
        message=lambda: str(kube.core.read_namespaced_pod(name, ns).status),
    )
    return str(pod.status.pod_ip)


def connect(cluster: LocalCluster, ns: str, pod: str, ip: str) -> str:
    """What ``pod`` reads from ``ip:8080`` (empty when the connection is refused or dropped)."""
    res = cluster.kubectl(
        "exec", "-n", ns, pod, "--", "sh", "-c", f"nc -w 2 {ip} 8080 </dev/null", check=False
    )
    return res.stdout.strip()


def kube_router_filters(ip: str) -> bool:
    """kube-router has programmed a pod firewall chain for ``ip``."""
    rules = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout
    return any("KUBE-POD-FW" in ln and ip in ln for ln in rules.splitlines())


def test_network_policy_blocks_undeclared_egress_and_admits_the_declared_one(
    real_node: str, cluster: LocalCluster, kube: Kube, namespace: str
) -> None:
    serve = "while true; do echo hello | nc -l -p 8080; done"
    kube.core.create_namespaced_pod(namespace, pod_on_real_node("web", serve))
    for name in ("client", "other"):
        kube.core.create_namespaced_pod(namespace, pod_on_real_node(name, "sleep 3600"))
    web = running_ip(kube, namespace, "web")
    client, other = (running_ip(kube, namespace, n) for n in ("client", "other"))
    # Without a policy both reach the server: what follows is the policy's doing.
    wait_for(lambda: connect(cluster, namespace, "other", web) == "hello", 30)
    deny = {"podSelector": {}, "policyTypes": ["Egress"]}
    allow = {
        "podSelector": {"matchLabels": {"app": "client"}},
        "policyTypes": ["Egress"],
        "egress": [
            {
                "to": [{"podSelector": {"matchLabels": {"app": "web"}}}],
                "ports": [{"protocol": "TCP", "port": 8080}],
            }
        ],
    }
    net = NetworkingV1Api(kube.api_client)
    for name, spec in (("default-deny-egress", deny), ("client-to-web", allow)):
        net.create_namespaced_network_policy(namespace, {"metadata": {"name": name}, "spec": spec})
    wait_for(lambda: kube_router_filters(client) and kube_router_filters(other), 30)
    wait_for(lambda: connect(cluster, namespace, "client", web) == "hello", 30)
    assert connect(cluster, namespace, "other", web) == ""


def test_a_service_is_reached_by_its_dns_name_through_the_cluster_dns(
    real_node: str, cluster: LocalCluster, kube: Kube, namespace: str
) -> None:
    """CoreDNS (kube-dns, 10.0.0.10, the kubelet's clusterDNS) answers the cluster's names:
    the pod's resolver finds ``web`` through its search path and the full name alike, and a
    name outside the cluster gets no answer (there is no upstream: nothing leaves)."""
    serve = "while true; do echo hello | nc -l -p 8080; done"
    kube.core.create_namespaced_pod(namespace, pod_on_real_node("web", serve))
    kube.core.create_namespaced_pod(namespace, pod_on_real_node("client", "sleep 3600"))
    service = {
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 8080, "targetPort": 8080}]},
    }
    cluster_ip = kube.core.create_namespaced_service(namespace, service).spec.cluster_ip
    running_ip(kube, namespace, "web")
    running_ip(kube, namespace, "client")
    fqdn = f"web.{namespace}.svc.cluster.local"

    def exec_(cmd: str) -> str:
        res = cluster.kubectl("exec", "-n", namespace, "client", "--", "sh", "-c", cmd, check=False)
        return res.stdout

    resolv = exec_("cat /etc/resolv.conf")
    assert "nameserver 10.0.0.10" in resolv and f"search {namespace}.svc.cluster.local" in resolv
    # kube-proxy and the endpoints of a new Service take a moment: wait until it answers
    wait_for(lambda: exec_("nc -w 2 web 8080 </dev/null").strip() == "hello", 30)
    assert exec_(f"nc -w 2 {fqdn} 8080 </dev/null").strip() == "hello"
    assert f"Address: {cluster_ip}" in exec_(f"nslookup {fqdn}")
    outside = exec_("nslookup example.com 2>&1; echo rc=$?")
    assert "can't find example.com" in outside and outside.endswith("rc=1\n"), outside
