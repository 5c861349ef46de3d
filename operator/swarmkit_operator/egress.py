"""Egress policies of Runs, served Topologies and gateways: the I/O around builders.netpol.

Resolves the declared hosts (``getaddrinfo`` in a thread, each answer cached for
:data:`CACHE_SECONDS` so a burst of Runs of one Workspace resolves each host once), knows
the apiserver's addresses (the host this operator talks to and, in a pod, the
``kubernetes`` Service address from the environment), and creates or applies the
NetworkPolicy. The policy is created before the pod's Job, so the pod never starts
without it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

from swarmkit_api.bundle import RunBundle
from swarmkit_api.egress import EgressPlan, Endpoint
from swarmkit_api.endpoints import declared_endpoints

from . import k8s
from .builders import netpol
from .builders.workload import Target

#: Seconds a resolved host is reused.
CACHE_SECONDS = 30.0
#: Seconds one resolution may take; past it the host counts as unresolved.
RESOLVE_TIMEOUT = 2.0

_cache: dict[str, tuple[float, list[str]]] = {}


def _lookup(host: str) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    return sorted({str(info[4][0]) for info in infos})


async def resolve_hosts(hosts: Sequence[str]) -> dict[str, list[str]]:
    """Each host's addresses (empty when it does not resolve in time); literals as is."""
    out: dict[str, list[str]] = {}
    pending: list[str] = []
    now = time.monotonic()
    for host in set(hosts):
        try:
            out[host] = [str(ipaddress.ip_address(host))]
            continue
        except ValueError:
            pass
        hit = _cache.get(host)
        if hit is not None and now - hit[0] < CACHE_SECONDS:
            out[host] = hit[1]
        else:
            pending.append(host)
    if pending:
        loop = asyncio.get_running_loop()
        tasks = [loop.run_in_executor(None, _lookup, h) for h in pending]
        done = await asyncio.gather(
            *(asyncio.wait_for(t, RESOLVE_TIMEOUT) for t in tasks), return_exceptions=True
        )
        for host, found in zip(pending, done, strict=True):
            addresses = found if isinstance(found, list) else []
            _cache[host] = (time.monotonic(), addresses)
            out[host] = addresses
    return out


async def apiserver_addresses(env: Mapping[str, str] | None = None) -> list[tuple[str, int]]:
    """The apiserver's (address, port) pairs this process knows of."""
    env = os.environ if env is None else env
    hosts: list[tuple[str, int]] = []
    own = k8s.apiserver_host()
    if own is not None:
        hosts.append(own)
    if env.get("KUBERNETES_SERVICE_HOST"):
        hosts.append(
            (env["KUBERNETES_SERVICE_HOST"], int(env.get("KUBERNETES_SERVICE_PORT") or 443))
        )
    resolved = await resolve_hosts([h for h, _ in hosts])
    return sorted({(a, port) for host, port in hosts for a in resolved.get(host, [])})


async def plan_for(
    bundle: RunBundle, extra: Sequence[Endpoint] = (), needs_apiserver: bool = False
) -> EgressPlan | None:
    """The bundle's resolved egress plan (None: the Workspace's policy is ``none``).

    ``needs_apiserver`` (a gateway opening Reviews) names the apiserver explicitly.
    """
    egress = bundle.workspace.egress
    if egress is not None and egress.policy == "none":
        return None
    api = await apiserver_addresses()
    named = list(extra)
    if needs_apiserver:
        named += [Endpoint(kind="apiserver", name="kubernetes", host=a, port=p) for a, p in api]
    skills = [(n, s.spec) for n, s in bundle.skills.items()]
    hosts = [e.host for e in declared_endpoints(bundle.workspace, skills)] + [e.host for e in named]
    table = await resolve_hosts(hosts)
    return netpol.plan(bundle, egress, lambda h: table.get(h, []), api, named)


async def delete_policy(namespace: str, name: str) -> None:
    await k8s.delete_object(k8s.networking_path("networkpolicies", namespace, name))


async def workload_policy(
    target: Target,
    deployment: Mapping[str, Any],
    bundle: RunBundle,
    port: int,
    needs_apiserver: bool = False,
) -> dict[str, Any] | None:
    """The NetworkPolicy of a served Topology's or a gateway's Deployment, from the plan
    ``bundle`` resolves to now: its pods, ingress on ``port`` only (None: the Workspace's
    policy is ``none``). The one builder (:func:`~.builders.netpol.workload_policy`) makes
    a Run's too; the pipeline applies this one before the Deployment
    (:mod:`swarmkit_operator.workload`)."""
    meta = deployment["metadata"]
    return netpol.workload_policy(
        target,
        await plan_for(bundle, needs_apiserver=needs_apiserver),
        name=meta["name"],
        pod_selector=deployment["spec"]["selector"]["matchLabels"],
        labels=dict(meta.get("labels") or {}),
        ingress_ports=[port],
    )
