"""The NetworkPolicy of a Run, a served Topology or an Agent gateway (pure functions).

:func:`plan` turns what a bundle declares (:func:`swarmkit_api.endpoints.declared_endpoints`)
and the Workspace's ``spec.egress`` into an :class:`EgressPlan`, resolving each host with
the ``resolve`` function it is given (the operator passes a real resolver; tests pass a
table). :func:`build_network_policy` renders a plan as a ``networking.k8s.io/v1``
NetworkPolicy selecting exactly the given pods: every ingress denied except the listed
ports; egress only to the cluster DNS, to each declared destination's resolved addresses
on its port, and to the ``allow`` CIDRs with the denied ranges (link-local, the apiserver)
cut out unless the CIDR names them. :func:`workload_policy` is the one NetworkPolicy of a
runner workload (a Run's Jobs, a served Topology's or a gateway's Deployment), owned by its
target.

Limitation (documented in docs/isolation.md): names resolve once, at render time; a
destination behind rotating addresses (a CDN) changes under the policy, and a name that
did not resolve is reported in ``plan.unresolved`` and gets no rule.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from swarmkit_api.bundle import RunBundle
from swarmkit_api.egress import (
    Denied,
    EgressPlan,
    EgressSpec,
    Endpoint,
    link_local_denied,
)
from swarmkit_api.endpoints import declared_endpoints

from . import MANAGED_BY
from .workload import Target, owner_reference

#: host → its addresses (empty when it does not resolve).
Resolve = Callable[[str], Sequence[str]]
#: The cluster DNS every policy allows: CoreDNS/kube-dns pods in kube-system, as kubeadm,
#: EKS, GKE and AKS label them. A node-local DNS cache needs an egress.allow entry.
DNS_PEER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}
DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]


def _cidr(address: str) -> str:
    ip = ipaddress.ip_address(address)
    return f"{ip}/{ip.max_prefixlen}"


def apiserver_denied(addresses: Sequence[tuple[str, int]]) -> list[Denied]:
    """The apiserver's (address, port) pairs as denied entries."""
    return [
        Denied(cidr=_cidr(a), port=p, why="the Kubernetes apiserver")
        for a, p in sorted(set(addresses))
    ]


def plan(
    bundle: RunBundle,
    egress: EgressSpec | None,
    resolve: Resolve,
    apiserver: Sequence[tuple[str, int]] = (),
    extra: Sequence[Endpoint] = (),
) -> EgressPlan | None:
    """The bundle's resolved declaration; None when the Workspace's policy is ``none``."""
    spec = egress or EgressSpec()
    if spec.policy == "none":
        return None
    skills = [(name, s.spec) for name, s in sorted(bundle.skills.items())]
    endpoints = [*declared_endpoints(bundle.workspace, skills), *extra]
    denied = [*link_local_denied(), *apiserver_denied(apiserver)]
    resolved: list[Endpoint] = []
    unresolved: list[str] = []
    cache: dict[str, list[str]] = {}
    for e in endpoints:
        if e.host not in cache:
            cache[e.host] = sorted({_cidr(a) for a in resolve(e.host)})
        addresses = cache[e.host]
        if not addresses:
            unresolved.append(f"{e.host}:{e.port}")
        resolved.append(e.model_copy(update={"addresses": addresses}))
    return EgressPlan(endpoints=resolved, allow=spec.allow, denied=denied, unresolved=unresolved)


def _named(address: ipaddress.IPv4Network | ipaddress.IPv6Network, e: Endpoint) -> bool:
    try:
        return ipaddress.ip_network(_cidr(e.host)) == address
    except ValueError:
        return False


def _endpoint_rules(p: EgressPlan) -> list[dict[str, Any]]:
    """One rule per port: the addresses of every destination on it (denied ones dropped)."""
    by_port: dict[int, set[str]] = {}
    for e in p.endpoints:
        for cidr in e.addresses:
            net = ipaddress.ip_network(cidr)
            denied = any(d.hits(net.network_address, e.port) for d in p.denied)
            if denied and not _named(net, e):
                continue
            by_port.setdefault(e.port, set()).add(cidr)
    return [
        {
            "to": [{"ipBlock": {"cidr": c}} for c in sorted(cidrs)],
            "ports": [{"protocol": "TCP", "port": port}],
        }
        for port, cidrs in sorted(by_port.items())
        if cidrs
    ]


def _allow_rules(p: EgressPlan) -> list[dict[str, Any]]:
    rules = []
    for a in p.allow:
        net = a.network
        cut = []
        for d in p.denied:
            dnet = ipaddress.ip_network(d.cidr)
            if dnet.version != net.version or net.subnet_of(dnet):  # type: ignore[arg-type]
                continue  # other family, or the CIDR names the denied range itself
            if d.port is not None and a.ports and (a.protocol != "TCP" or d.port not in a.ports):
                continue  # the apiserver's port is not opened by this entry
            if dnet.subnet_of(net):  # type: ignore[arg-type]
                cut.append(str(dnet))
        block: dict[str, Any] = {"cidr": str(net)}
        if cut:
            block["except"] = sorted(cut)
        rule: dict[str, Any] = {"to": [{"ipBlock": block}]}
        if a.ports:
            rule["ports"] = [{"protocol": a.protocol, "port": p} for p in sorted(set(a.ports))]
        rules.append(rule)
    return rules


def build_network_policy(
    *,
    name: str,
    namespace: str,
    owner: Mapping[str, Any],
    pod_selector: Mapping[str, str],
    labels: Mapping[str, str],
    egress_plan: EgressPlan,
    ingress_ports: Sequence[int] = (),
) -> dict[str, Any]:
    """The NetworkPolicy selecting ``pod_selector``'s pods, owned by ``owner``."""
    ingress = [{"ports": [{"protocol": "TCP", "port": p} for p in sorted(set(ingress_ports))]}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**MANAGED_BY, **labels},
            "ownerReferences": [dict(owner)],
        },
        "spec": {
            "podSelector": {"matchLabels": dict(pod_selector)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": ingress if ingress_ports else [],
            "egress": [
                {"to": [DNS_PEER], "ports": DNS_PORTS},
                *_endpoint_rules(egress_plan),
                *_allow_rules(egress_plan),
            ],
        },
    }


def workload_policy(
    target: Target,
    egress_plan: EgressPlan | None,
    *,
    name: str,
    pod_selector: Mapping[str, str],
    labels: Mapping[str, str],
    ingress_ports: Sequence[int] = (),
) -> dict[str, Any] | None:
    """The egress NetworkPolicy of a runner workload, the one builder of it for all three
    (a Run's Jobs, a served Topology's and an Agent gateway's Deployment): ``name``,
    selecting ``pod_selector``'s pods, controlled by ``target`` like every object of its
    workload; None when ``egress_plan`` is (the Workspace's egress policy is ``none``)."""
    if egress_plan is None:
        return None
    return build_network_policy(
        name=name,
        namespace=target.namespace,
        owner=owner_reference(target),
        pod_selector=pod_selector,
        labels=labels,
        egress_plan=egress_plan,
        ingress_ports=ingress_ports,
    )


__all__ = [
    "DNS_PEER",
    "Resolve",
    "apiserver_denied",
    "build_network_policy",
    "plan",
    "workload_policy",
]
