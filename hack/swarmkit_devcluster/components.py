"""The command lines of the control-plane components (etcd → kube-apiserver →
kube-controller-manager, kube-scheduler → process node) as :class:`~.cluster.LocalCluster`
starts them. Pure: paths, ports and credentials come in as arguments."""

from __future__ import annotations

import sys
from pathlib import Path

from swarmkit_devcluster.paths import binary
from swarmkit_devcluster.pki import Pki

CONTROLLERS = [
    "job-controller",
    "cronjob-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "ttl-after-finished-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "endpoints-controller",
    "endpointslice-controller",
    "disruption-controller",
    "resourcequota-controller",
    "pod-garbage-collector-controller",
]

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "process-node")

_COMMON = ["--bind-address=127.0.0.1", "--leader-elect=false", "--v=1"]


def etcd_cmd(data_dir: Path, client_url: str, peer_url: str) -> list[str]:
    return [
        str(binary("etcd")),
        "--name=default",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=default={peer_url}",
        "--unsafe-no-fsync",
        "--log-level=warn",
        "--quota-backend-bytes=4294967296",
    ]


def apiserver_cmd(pki: Pki, etcd_url: str, port: int) -> list[str]:
    return [
        str(binary("kube-apiserver")),
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={pki.serving_crt}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_crt}",
        f"--token-auth-file={pki.tokens_csv}",
        "--authorization-mode=Node,RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--allow-privileged=true",
        "--kubelet-preferred-address-types=InternalIP",
        f"--kubelet-certificate-authority={pki.ca_crt}",
        "--profiling=false",
        "--event-ttl=1h",
        "--v=1",
    ]


def controller_manager_cmd(pki: Pki, kubeconfig: Path, port: int) -> list[str]:
    return [
        str(binary("kube-controller-manager")),
        f"--kubeconfig={kubeconfig}",
        f"--secure-port={port}",
        f"--controllers={','.join(CONTROLLERS)}",
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_crt}",
        "--use-service-account-credentials=true",
        "--concurrent-job-syncs=10",
        "--concurrent-gc-syncs=20",
        *_COMMON,
    ]


def scheduler_cmd(kubeconfig: Path, port: int) -> list[str]:
    return [
        str(binary("kube-scheduler")),
        f"--kubeconfig={kubeconfig}",
        f"--secure-port={port}",
        *_COMMON,
    ]


def process_node_cmd(
    pki: Pki, kubeconfig: Path, state_dir: Path, node_name: str, image_map: str | None
) -> list[str]:
    """``python -m swarmkit_devcluster.process_node ...`` with this interpreter; the kubelet
    port serves with the apiserver's serving certificate."""
    cmd = [
        sys.executable,
        "-m",
        "swarmkit_devcluster.process_node",
        f"--kubeconfig={kubeconfig}",
        f"--state-dir={state_dir}",
        f"--name={node_name}",
        f"--tls-cert={pki.serving_crt}",
        f"--tls-key={pki.serving_key}",
    ]
    if image_map:
        cmd.append(f"--image-map={image_map}")
    return cmd
