"""A real local Kubernetes control plane for tests and the demo.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from source (Go module
proxy) into a version-keyed cache, plus the *process node*
(:mod:`swarmkit_devcluster.process_node`), a kubelet stand-in that runs pods as local processes.

Entry points: ``python -m swarmkit_devcluster build|up|down|operator-up|operator-down`` and the
Python API :class:`swarmkit_devcluster.cluster.LocalCluster` (used by the pytest fixtures in
:mod:`swarmkit_devcluster.testing`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from swarmkit_devcluster.cluster import ClusterError, LocalCluster

__all__ = ["ClusterError", "LocalCluster"]


def __getattr__(name: str) -> Any:
    # Lazy, so importing a submodule (e.g. the process node, run as
    # `python -m swarmkit_devcluster.process_node`) does not also import cluster.py.
    if name in __all__:
        from swarmkit_devcluster import cluster

        return getattr(cluster, name)
    raise AttributeError(name)
