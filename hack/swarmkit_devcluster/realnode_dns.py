"""The real node's cluster DNS (issue 38): CoreDNS, built from the Go module proxy
(``hack/coredns``), running as a pod on the real node behind the ``kube-dns`` Service at
:data:`~swarmkit_devcluster.realnode.DNS_IP`, the kubelet's ``clusterDNS``.

It is labelled as kubeadm, EKS, GKE and AKS label their cluster DNS (``k8s-app: kube-dns`` in
``kube-system``), so the operator's NetworkPolicies admit it the way they would on a user's
cluster. It answers ``cluster.local`` (Services, headless Services, pods) and nothing else:
no ``forward``, since pod traffic never leaves this machine. The pod is Pod Security
``restricted`` (uid 65532, read-only root, no capabilities); it binds port 53 through the
safe sysctl ``net.ipv4.ip_unprivileged_port_start`` instead of NET_BIND_SERVICE. The object
builders are pure; :mod:`swarmkit_devcluster.cluster` creates them once the node is Ready.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swarmkit_devcluster.paths import COREDNS_VERSION, binary
from swarmkit_devcluster.realnode import DNS_IP, NODE_NAME, TAINT_KEY
from swarmkit_devcluster.realnode_images import image_layer, write_archive

COREDNS_REF = f"swarmkit.local/coredns:{COREDNS_VERSION.lstrip('v')}"
NAMESPACE = "kube-system"
NAME = "coredns"
LABELS = {"k8s-app": "kube-dns"}

COREFILE = """.:53 {
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        ttl 30
    }
    cache 30
    loadbalance
}
"""


def coredns_archive(out_dir: Path) -> Path:
    """The CoreDNS image: the static binary alone, user 65532 (cached by version)."""
    layer = image_layer({"coredns": (binary("coredns").read_bytes(), 0o755)}, {}, {})
    config: dict[str, object] = {"Entrypoint": ["/coredns"], "User": "65532"}
    return write_archive(archive_path(out_dir), COREDNS_REF, layer, config)


def archive_path(out_dir: Path) -> Path:
    return out_dir / f"coredns-{COREDNS_VERSION}.oci.tar"


def _rbac() -> list[dict[str, Any]]:
    rbac = "rbac.authorization.k8s.io/v1"
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"}
    subject = {"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}
    rules = [
        {
            "apiGroups": [""],
            "resources": ["services", "pods", "namespaces"],
            "verbs": ["list", "watch"],
        },
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["list", "watch"],
        },
    ]
    return [
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "system:coredns"},
         "rules": rules},
        {"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": "system:coredns"},
         "roleRef": ref, "subjects": [subject]},
    ]  # fmt: skip


def _pod_spec() -> dict[str, Any]:
    probe = {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2}
    return {
        "serviceAccountName": NAME,
        "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
        "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
            "sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "53"}],
        },
        "containers": [
            {
                "name": "coredns",
                "image": COREDNS_REF,
                "imagePullPolicy": "Never",
                "args": ["-conf", "/etc/coredns/Corefile"],
                "ports": [
                    {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                    {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
                ],
                "readinessProbe": probe,
                "livenessProbe": {**probe, "httpGet": {"path": "/health", "port": 8080}},
                "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "20m"}},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns"}],
            }
        ],
        "volumes": [{"name": "config", "configMap": {"name": NAME}}],
    }


def dns_objects() -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) pairs, in creation order."""
    ns = f"/api/v1/namespaces/{NAMESPACE}"
    meta = {"name": NAME, "namespace": NAMESPACE, "labels": LABELS}
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": LABELS},
            "template": {"metadata": {"labels": LABELS}, "spec": _pod_spec()},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {**meta, "name": "kube-dns"},
        "spec": {
            "selector": LABELS,
            "clusterIP": DNS_IP,
            "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
            ],
        },
    }
    rbac_objs = _rbac()
    return [
        (f"{ns}/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}),
        (f"{rbac}/clusterroles", rbac_objs[0]),
        (f"{rbac}/clusterrolebindings", rbac_objs[1]),
        (f"{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                              "data": {"Corefile": COREFILE}}),
        (f"{ns}/services", service),
        (f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", deployment),
    ]  # fmt: skip
