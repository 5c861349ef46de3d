"""The steps of the runner-workload pipeline (see the package docstring), each with its I/O.

Every step is the same for a Run's Job, a served Topology and an Agent gateway; what a
kind adds is passed in (the Secret references it needs, whether it is served, its
manifests). A step that cannot go on returns a :class:`Stop` (a condition reason and
message, when to look again); an object that bears a name the operator derives but is
not the operator's raises :class:`~swarmkit_operator.builders.trust.Refused`
(``TamperedObject``), which the caller turns into its failure (a Run) or its ``Serving``
condition and an Event (a served Topology, a gateway).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from swarmkit_api.bundle import RunBundle
from swarmkit_api.conditions import (
    REASON_FUNNEL_NOT_SERVABLE,
    REASON_RUNTIME_CLASS_NOT_FOUND,
    REASON_WAITING,
)
from swarmkit_api.egress import EgressPlan
from swarmkit_api.run import RunSpec

from .. import k8s, sandbox
from ..builders import netpol, trust, unservable
from ..builders.workload import Target
from .resolve import Resolved, Resolver, Waiting


@dataclass(frozen=True)
class Stop:
    """The pipeline stopped before the workload: a condition reason and message."""

    reason: str
    message: str
    #: Seconds until the target should be looked at again without an event (None: events).
    recheck: float | None = None
    #: The target is not ready yet: a running workload keeps the version it pins.
    waiting: bool = False
    #: No workload may run it at all, not even an older version: a running one goes.
    remove: bool = False


# -- 1. resolve --------------------------------------------------------------------------
async def resolve(resolver: Resolver, target: Target, spec: RunSpec) -> Resolved | Stop:
    """What ``target``'s workload pins, or why it waits (``Waiting`` as a :class:`Stop`)."""
    resolution = await resolver.resolve(target, spec)
    if isinstance(resolution, Waiting):
        return Stop(REASON_WAITING, resolution.message, resolution.recheck, waiting=True)
    return resolution


# -- 2. refusals -------------------------------------------------------------------------
async def refusals(bundle: RunBundle, served: str | None = None) -> Stop | None:
    """Why no pod may run ``bundle``: a funnel-gated node a served workload (``served``
    names it) could reach, then a RuntimeClass that does not exist."""
    if served is not None:
        refused = unservable.refusal(bundle, served)
        if refused is not None:
            return Stop(REASON_FUNNEL_NOT_SERVABLE, refused, remove=True)
    missing = await sandbox.missing_runtime_class(bundle)
    if missing is not None:
        return Stop(REASON_RUNTIME_CLASS_NOT_FOUND, missing, sandbox.RECHECK_SECONDS)
    return None


# -- 3. bundle ---------------------------------------------------------------------------
async def ensure_bundle(
    manifest: Mapping[str, Any], pinned: str | None = None
) -> Mapping[str, Any] | None:
    """Create the immutable bundle ConfigMap ``manifest``: None when it was created now.

    One already there under its name is used, and returned, only when its data is the
    operator's, else :class:`~swarmkit_operator.builders.trust.Refused`
    (``TamperedObject``; gone meanwhile: ``PinnedRevisionMissing``):

    - a served workload's (``pinned`` None) must be exactly what it renders now: it runs
      the current version, and its name is content-addressed;
    - a Run's must have the digest ``pinned`` (its ``status.bundleSha256``; "" before that
      write: the digest rendered now): a Run keeps what it pinned first, and reads it back
      from the ConfigMap returned (:meth:`~.resolve.Resolver.pinned_bundle`). A Run's goes
      through the start lane, as its Job does (Run starts have their own pool)."""
    namespace, name = str(manifest["metadata"]["namespace"]), str(manifest["metadata"]["name"])
    if pinned is None:
        created = await k8s.create_config_map(manifest) is not None
    else:
        path = k8s.core_path("configmaps", namespace)
        created = await k8s.create_start_object(path, manifest) is not None
    if created:
        return None
    found = await k8s.read_config_map(namespace, name)
    what = "the workload's bundle" if pinned is None else "the run's bundle"
    return trust.check(what, name, found, pinned or trust.data_digest(manifest["data"]))


# -- 4./5. egress policy and workload objects (a served workload's: served._apply) -----
@dataclass(frozen=True)
class Owned:
    """A workload object that is the operator's: ``created`` now (as the API returned it),
    or there already and proven (:func:`~swarmkit_operator.builders.trust.check_made`);
    ``uid`` is what the target's ``status.createdUids`` records for it ("": it vanished)."""

    uid: str
    created: dict[str, Any] | None = None


async def create_owned(manifest: Mapping[str, Any], target: Target, made: trust.Made) -> Owned:
    """Create a workload object (through the start pool: Run starts have their own lane).
    One already under its name is used only when ``made`` proves the operator created it
    for ``target``; else :class:`~swarmkit_operator.builders.trust.Refused`."""
    created = await k8s.create_start_object(k8s.object_path(manifest, collection=True), manifest)
    if created is not None:
        return Owned(str((created.get("metadata") or {}).get("uid") or ""), created)
    found = await k8s.get_object(k8s.object_path(manifest))
    return Owned(trust.check_made(str(manifest["kind"]), found, target, made))


async def create_policy(
    target: Target,
    made: trust.Made,
    plan: EgressPlan | None,
    *,
    name: str,
    pod_selector: Mapping[str, str],
    labels: Mapping[str, str],
) -> Owned | None:
    """Step 4 for a Job: the NetworkPolicy its pods run under, from ``plan`` (the one the
    bundle pins; None: the egress policy is ``none``, no NetworkPolicy), created once
    (:func:`create_owned`): a Run's objects never change once made. A served workload's
    comes from the same builder (:func:`~swarmkit_operator.builders.netpol.workload_policy`)
    and is applied with its Deployment (:mod:`.served`)."""
    policy = netpol.workload_policy(
        target, plan, name=name, pod_selector=pod_selector, labels=labels
    )
    return None if policy is None else await create_owned(policy, target, made)


# -- 7. prune ----------------------------------------------------------------------------
async def prune_bundles(
    namespace: str, bundles: Iterable[tuple[str, str]], keep: str | None
) -> None:
    """Delete the bundle ConfigMaps ``(name, uid)`` but ``keep``: a rolled-out workload's
    pods no longer mount them (and with them go their pins on rendered ConfigMaps)."""
    for name, uid in bundles:
        if name != keep:
            await k8s.delete_config_map(namespace, name, uid or None)


__all__ = [
    "Owned",
    "Stop",
    "create_owned",
    "create_policy",
    "ensure_bundle",
    "prune_bundles",
    "refusals",
    "resolve",
]
