"""The pipeline for a served workload: a Deployment behind a Service (package docstring).

A served Topology (:mod:`swarmkit_operator.serving`) and an Agent gateway
(:mod:`swarmkit_operator.gateways`) each describe themselves as a :class:`Served` (their
target, what they resolve, how they shape the bundle, their pure manifests) and call
:func:`roll_out`. It resolves, refuses, creates the bundle, and applies the NetworkPolicy,
the extra objects (a gateway's RBAC), the Service and the Deployment only when the
observed Deployment does not already run that pod template at that replica count (the
bundle ConfigMap is created, or checked, right before: the new template mounts it); while
the Deployment is up to date, every pass checks the objects its pods depend on instead
(``_guard``: the operator's restored, someone else's reported). Each
caller turns the result into its ``Serving`` verdict and prunes the superseded bundles
once the Deployment rolled out. While no replica is ready, :func:`secret_wait` says whether
its pods wait for a Secret (key) their env names: read from the pods' status, since the
operator reads no Secret (issue 41).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from swarmkit_api.conditions import REASON_TAMPERED_OBJECT
from swarmkit_api.run import RunSpec

from .. import egress, k8s
from ..builders import trust
from ..builders.bundle import RenderedBundle
from ..builders.run_pod import secret_not_found
from ..builders.workload import Target, deployment_summary, involved, up_to_date
from . import pipeline
from .ledger import Ledger
from .pipeline import Stop
from .resolve import Resolver

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Manifests:
    """A served workload's objects, as its builder made them."""

    deployment: dict[str, Any]
    service: dict[str, Any]
    #: The port its pods serve on (the NetworkPolicy's only ingress).
    port: int
    #: Applied before the Service (a gateway's ServiceAccount, Role and RoleBinding).
    extra: tuple[dict[str, Any], ...] = ()
    #: Whether its pods talk to the apiserver (a gateway opens Reviews).
    needs_apiserver: bool = False


class Served(Protocol):
    """What a served kind tells the pipeline."""

    @property
    def target(self) -> Target: ...

    @property
    def what(self) -> str:
        """How a refusal names it ("served topology x", "agent x's gateway")."""
        ...

    @property
    def recorded(self) -> Mapping[str, str]:
        """The target's ``status.createdUids``: what proves its objects the operator's."""
        ...

    def run_spec(self) -> RunSpec: ...

    def shape(self, rendered: RenderedBundle) -> RenderedBundle:
        """The resolved bundle as it is served (without ``spec.serve``, with the gateway)."""
        ...

    def bundle_config_map(self, rendered: RenderedBundle) -> dict[str, Any]: ...

    def manifests(self, rendered: RenderedBundle, config_map: str) -> Manifests: ...


@dataclass(frozen=True)
class Rollout:
    """What :func:`roll_out` made current."""

    rendered: RenderedBundle
    config_map: str
    #: The Deployment as observed (or as just applied), a ``deployment_summary``.
    deployment: Mapping[str, Any] | None
    #: ``status.createdUids`` as the target's status write must record it (every object
    #: of the workload the operator created, by uid).
    created_uids: Mapping[str, str]
    applied: bool = False


async def roll_out(
    resolver: Resolver,
    served: Served,
    observed: Mapping[str, Any] | None,
    bundles: Collection[str] | None = None,
) -> Rollout | Stop:
    """Steps 1 to 5 for ``served``: ``observed`` is its Deployment now (a
    ``deployment_summary``, None when there is none); ``bundles``: the names of its
    bundle ConfigMaps known to exist (an index's; None: not known), so a bundle deleted
    under an up-to-date Deployment is created again. An object under one of its
    names that the operator did not provably make for it (its uid is not in
    ``served.recorded`` nor in the ledger: :func:`~swarmkit_operator.builders.trust.check_made`)
    stops it with ``TamperedObject``: that object is neither used nor changed."""
    try:
        return await _roll_out(resolver, served, observed, bundles)
    except trust.Refused as refused:  # its Serving condition says so (and its Event)
        return Stop(refused.reason, refused.message)


async def _roll_out(
    resolver: Resolver,
    served: Served,
    observed: Mapping[str, Any] | None,
    bundles: Collection[str] | None,
) -> Rollout | Stop:
    target, ledger = served.target, resolver.ledger
    made = ledger.proof(target, served.recorded)
    if observed is not None:
        name = str((observed.get("metadata") or {}).get("name"))
        ledger.remember(
            target, "Deployment", name, trust.check_made("Deployment", observed, target, made)
        )
    resolved = await pipeline.resolve(resolver, target, served.run_spec())
    if isinstance(resolved, Stop):
        return resolved
    rendered = served.shape(resolved.rendered)
    stop = await pipeline.refusals(rendered.bundle, served.what)
    if stop is not None:
        return stop
    config_map = served.bundle_config_map(rendered)
    name = str(config_map["metadata"]["name"])
    manifests = served.manifests(rendered, name)
    if up_to_date(observed, manifests.deployment):
        # Its pod template names this bundle: created (and checked) when it was applied.
        if bundles is not None and name not in bundles:
            await pipeline.ensure_bundle(config_map)
        await _guard(ledger, made, target, await _companions(target, rendered, manifests))
        return Rollout(rendered, name, observed, _uids(ledger, served))
    await pipeline.ensure_bundle(config_map)
    applied = await _apply(ledger, made, target, rendered, manifests)
    return Rollout(rendered, name, deployment_summary(applied), _uids(ledger, served), applied=True)


def _uids(ledger: Ledger, served: Served) -> dict[str, str]:
    return ledger.record(served.target, served.recorded) or dict(served.recorded)


async def _apply(
    ledger: Ledger, made: trust.Made, target: Target, rendered: RenderedBundle, m: Manifests
) -> dict[str, Any]:
    """Steps 4 and 5: the NetworkPolicy (before any new pod), the extra objects, the
    Service and the Deployment (returned as applied). Every one of them is checked first:
    nothing is written for a workload one of whose objects (by name) the operator did not
    provably make for ``target``; each applied one is remembered by uid until recorded."""
    meta = m.deployment["metadata"]
    docs = [*await _companions(target, rendered, m), m.deployment]
    for doc in reversed(docs):  # the Deployment first: what a refusal names when it can
        found = await k8s.get_object(k8s.object_path(doc))
        kind, name = str(doc["kind"]), str(doc["metadata"]["name"])
        ledger.remember(target, kind, name, trust.check_made(kind, found, target, made))
    if all(doc["kind"] != "NetworkPolicy" for doc in docs):  # the pods need none now
        await egress.delete_policy(meta["namespace"], meta["name"])
    applied: dict[str, Any] = {}
    for doc in docs:
        applied = await k8s.apply(k8s.object_path(doc), doc)
        uid = str((applied.get("metadata") or {}).get("uid") or "")
        ledger.remember(target, str(doc["kind"]), str(doc["metadata"]["name"]), uid)
    return applied


async def _companions(
    target: Target, rendered: RenderedBundle, m: Manifests
) -> list[dict[str, Any]]:
    """The objects the Deployment's pods depend on, in the order they are applied: the
    NetworkPolicy (step 4; None: the pods need none), the extra objects, the Service."""
    policy = await egress.workload_policy(
        target, m.deployment, rendered.bundle, m.port, needs_apiserver=m.needs_apiserver
    )
    return [*([policy] if policy is not None else []), *m.extra, m.service]


async def _guard(
    ledger: Ledger, made: trust.Made, target: Target, docs: list[dict[str, Any]]
) -> None:
    """Every pass of an up-to-date workload: each object its pods depend on (isolation,
    permissions, address) is still the operator's and as it wrote it. One the operator
    made that was edited in place or deleted is restored (applied again, with a Warning
    Event naming who changed it; silently when only the operator wrote it: its own plan
    moved, e.g. a host's addresses): the running pods rely on it, and nothing else would
    rewrite it before the next rollout. One under its name that the operator did not
    make is :class:`~..builders.trust.Refused` as at a rollout (reported, neither used nor
    changed: it may be a person's object)."""
    for doc in docs:
        found = await k8s.get_object(k8s.object_path(doc))
        kind, name = str(doc["kind"]), str(doc["metadata"]["name"])
        uid = trust.check_made(kind, found, target, made)
        why = "it was deleted" if found is None else trust.drift(found, doc)
        if why is None:
            ledger.remember(target, kind, name, uid)
            continue
        applied = await k8s.apply(k8s.object_path(doc), doc)
        ledger.remember(target, kind, name, str((applied.get("metadata") or {}).get("uid") or ""))
        others = [] if found is None else trust.other_managers(found, k8s.FIELD_MANAGER)
        if found is not None and not others:  # only the operator wrote it: its plan moved
            log.info("%s %s: %s applied again (%s)", target.kind, target.name, name, why)
            continue
        what = why if found is None else f"{', '.join(others)} changed its {why}"
        message = f"{kind} {name} is the operator's but {what}: restored"
        log.warning("%s %s/%s: %s", target.kind, target.namespace, target.name, message)
        await k8s.post_event(involved(target), "Warning", REASON_TAMPERED_OBJECT, message)


async def observe(namespace: str, name: str) -> dict[str, Any] | None:
    """The Deployment ``name`` as it is now (a ``deployment_summary``), or None."""
    found = await k8s.get_object(k8s.apps_path("deployments", namespace, name))
    return deployment_summary(found) if found is not None else None


async def secret_wait(namespace: str, selector: Mapping[str, str]) -> str | None:
    """The Secret (and key) the workload's pods wait for (their containers in the kubelet's
    ``CreateContainerConfigError``), or None: only worth a LIST while no replica is ready."""
    labels = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    for pod in await k8s.list_objects(k8s.core_path("pods", namespace), labels):
        found = secret_not_found(pod)
        if found is not None:
            return found
    return None


__all__ = ["Manifests", "Rollout", "Served", "observe", "roll_out", "secret_wait"]
