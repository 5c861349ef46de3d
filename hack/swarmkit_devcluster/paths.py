"""Versions, the binary cache and repository paths."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.16"
HELM_VERSION = "v4.3.2"
# The real node (issue 38): the versions tried on this machine.
CONTAINERD_VERSION = "v2.4.2"
RUNC_VERSION = "v1.5.3"
CNI_PLUGINS_VERSION = "v1.10.0"
KUBE_ROUTER_VERSION = "v2.1.0"
COREDNS_VERSION = "v1.15.0"
# The per-user web view's sign-in in the tests (issue 41): the chart's proxy and an OIDC
# provider for it.
OAUTH2_PROXY_VERSION = "v7.15.6"
MOCKOIDC_VERSION = "v0.0.0-20261103160011-e06ed0b7cb7f"

PACKAGE_DIR = Path(__file__).resolve().parent


def cache_root() -> Path:
    """``$SWARMKIT_CACHE_DIR`` or ``$XDG_CACHE_HOME/swarmkit-operator`` (``~/.cache/...``)."""
    env = os.environ.get("SWARMKIT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "swarmkit-operator"


@dataclass(frozen=True)
class Binary:
    """One binary built from a Go wrapper module under ``hack/``."""

    name: str
    module_dir: str  # directory under hack/ holding the wrapper go.mod
    package: str  # Go main package
    component: str  # cache sub-directory (k8s, etcd, helm)
    version: str
    ldflags: str = ""
    cgo: bool = False  # runc needs cgo (nsexec) and links libseccomp
    tags: str = ""  # Go build tags

    @property
    def path(self) -> Path:
        return cache_root() / self.component / self.version / self.name


def _k8s_ldflags() -> str:
    minor = KUBERNETES_VERSION.split(".")[1]
    parts = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        parts += [
            f"-X {pkg}.gitVersion={KUBERNETES_VERSION}",
            f"-X {pkg}.gitMajor=1",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return " ".join(parts)


def _kube(name: str, module_dir: str = "k8s") -> Binary:
    return Binary(
        name=name,
        module_dir=module_dir,
        package=f"k8s.io/kubernetes/cmd/{name}",
        component="k8s",
        version=KUBERNETES_VERSION,
        ldflags=_k8s_ldflags(),
    )


BINARIES: dict[str, Binary] = {
    "etcd": Binary("etcd", "etcd", "go.etcd.io/etcd/server/v3", "etcd", ETCD_VERSION),
    "kube-apiserver": _kube("kube-apiserver"),
    "kube-controller-manager": _kube("kube-controller-manager"),
    "kube-scheduler": _kube("kube-scheduler"),
    "kubectl": _kube("kubectl"),
    "helm": Binary(
        "helm",
        "helm",
        "helm.sh/helm/v4/cmd/helm",
        "helm",
        HELM_VERSION,
        ldflags=f"-X helm.sh/helm/v4/internal/version.version={HELM_VERSION}",
    ),
}


_CNI = "github.com/containernetworking/plugins/plugins"
_CONTAINERD = "github.com/containerd/containerd/v2/cmd"

# The real node's binaries; built only by `make node-binaries` (root-only machinery).
NODE_BINARIES: dict[str, Binary] = {
    "kubelet": _kube("kubelet", "node"),
    "kube-proxy": _kube("kube-proxy", "node"),
    **{
        n: Binary(
            n,
            "containerd",
            f"{_CONTAINERD}/{n}",
            "containerd",
            CONTAINERD_VERSION,
            ldflags=f"-X github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}",
        )
        for n in ("containerd", "containerd-shim-runc-v2", "ctr")
    },
    "runc": Binary(
        "runc",
        "runc",
        "github.com/opencontainers/runc",
        "runc",
        RUNC_VERSION,
        ldflags=f"-X main.version={RUNC_VERSION.lstrip('v')}",
        cgo=True,
        tags="seccomp",
    ),
    **{
        n: Binary(n, "cni", f"{_CNI}/{kind}/{n}", "cni", CNI_PLUGINS_VERSION)
        for kind, n in (
            ("main", "bridge"),
            ("ipam", "host-local"),
            ("main", "loopback"),
            ("meta", "portmap"),
        )
    },
    "kube-router": Binary(
        "kube-router",
        "kube-router",
        "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router",
        "kube-router",
        KUBE_ROUTER_VERSION,
    ),
    # The cluster DNS: a lean CoreDNS main in the wrapper module (its plugins, no `forward`).
    "coredns": Binary(
        "coredns",
        "coredns",
        "github.com/swarmkit-operator/hack/coredns",
        "coredns",
        COREDNS_VERSION,
        ldflags=f"-X github.com/coredns/coredns/coremain.GitCommit={COREDNS_VERSION}",
    ),
}


# The per-user web view behind a real oauth2-proxy signing people in with a real OIDC
# provider (mockoidc's server, wrapped in a command: hack/mockoidc); `make web-auth`.
WEB_AUTH_BINARIES: dict[str, Binary] = {
    "oauth2-proxy": Binary(
        "oauth2-proxy",
        "oauth2-proxy",
        "github.com/oauth2-proxy/oauth2-proxy/v7",
        "oauth2-proxy",
        OAUTH2_PROXY_VERSION,
        ldflags="-X github.com/oauth2-proxy/oauth2-proxy/v7/pkg/version.VERSION="
        + OAUTH2_PROXY_VERSION,
    ),
    "mockoidc": Binary(
        "mockoidc",
        "mockoidc",
        "github.com/swarmkit-operator/hack/mockoidc",
        "mockoidc",
        MOCKOIDC_VERSION,
        ldflags=f"-X main.version={MOCKOIDC_VERSION}",
    ),
}


def binary(name: str) -> Path:
    return (BINARIES.get(name) or NODE_BINARIES.get(name) or WEB_AUTH_BINARIES[name]).path


def hack_dir() -> Path:
    """The ``hack/`` directory holding the Go wrapper modules."""
    return PACKAGE_DIR.parent


def repo_root() -> Path:
    """The repository root: found from the package location, else from the working directory."""
    for start in (PACKAGE_DIR, Path.cwd().resolve()):
        for candidate in (start, *start.parents):
            if (candidate / "pyproject.toml").is_file() and (candidate / "hack").is_dir():
                return candidate
    return Path.cwd().resolve()


def default_state_dir() -> Path:
    """``$SWARMKIT_CLUSTER_DIR`` or ``<repo>/.cluster``."""
    env = os.environ.get("SWARMKIT_CLUSTER_DIR")
    if env:
        return Path(env).expanduser().resolve()
    return repo_root() / ".cluster"
