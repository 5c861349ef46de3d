"""Serving a Topology over A2A (``spec.serve``): the I/O around :mod:`.builders.serve`.

Run by the Topology reconciler (so one writer owns the Topology's status): the Topology is
a :class:`ServedTopology` for the runner-workload pipeline (:mod:`.workload.served`), which
resolves it exactly as a Run would (the one resolver), creates the content-addressed
bundle ConfigMap and server-side applies the Deployment and Service when their checksum
or replica count differs from what the Deployments index shows; this module reports the
Deployment's readiness as the ``Serving`` condition, ``status.serving`` and
``status.url``.

While the topology is not Ready (or its new version cannot be resolved yet) the running
Deployment is left alone: the pinned old version keeps serving, and the condition says why
the new one is not rolled out. While no replica is ready, a bearer token's Secret (key) the
pods wait for is named (``Serving=False`` ``SecretNotFound``), read from their status: the
operator reads no Secret (issue 41). Once a version has rolled out completely, the bundle
ConfigMaps of older versions are deleted (and with them their pins on rendered ConfigMaps).
Without ``spec.serve`` the Deployment and Service are deleted.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from swarmkit_api.conditions import (
    REASON_INVALID_SERVE_SPEC,
    REASON_NO_READY_REPLICAS,
    REASON_NOT_SERVED,
    REASON_SECRET_NOT_FOUND,
    SERVING,
)
from swarmkit_api.run import RunSpec
from swarmkit_api.topology import ServeSpec

from . import egress, k8s
from .builders import Verdict
from .builders import serve as sb
from .builders.bundle import RenderedBundle
from .builders.workload import Target, deployment_summary
from .config import OperatorConfig
from .indexes import PRESENT, IndexId, index
from .workload import pipeline
from .workload import served as served_pipeline
from .workload.pipeline import Stop
from .workload.resolve import Resolver
from .workload.served import Manifests, roll_out

log = logging.getLogger("swarmkit_operator.serving")

SERVE_DEPLOYMENTS = IndexId.SERVE_DEPLOYMENTS
SERVE_BUNDLES = IndexId.SERVE_BUNDLES
#: Seconds between looks at a Deployment with no ready replica (its pods' waiting state,
#: e.g. a missing token Secret, changes no Deployment field: no event says so).
SECRET_RECHECK = 5.0


class Lookups(Protocol):
    """What the reconcile controller offers this module (its index lookups)."""

    def lookup(self, index: IndexId, key: Any) -> Any: ...

    def lookup_all(self, index: IndexId, key: Any) -> list[Any]: ...


@index(
    "deployments",
    id=SERVE_DEPLOYMENTS,
    labels={sb.SERVE_LABEL: PRESENT},
    group="apps",
    version="v1",
)
def serve_deployments(
    body: Mapping[str, Any], namespace: str | None, labels: Mapping[str, str], **_: Any
) -> dict[Any, Any]:
    """(namespace, topology) → the served Deployment's summary (owners, annotations,
    replicas, status, pod template checksum)."""
    summary = deployment_summary(body)
    return {(namespace, labels[sb.SERVE_LABEL]): summary}


@index("configmaps", id=SERVE_BUNDLES, labels={sb.SERVE_LABEL: PRESENT}, metadata_only=True)
def serve_bundles(
    namespace: str | None, name: str, uid: str, labels: Mapping[str, str], **_: Any
) -> dict[Any, Any]:
    """(namespace, topology) → its served bundle ConfigMaps (every version still there)."""
    return {(namespace, labels[sb.SERVE_LABEL]): {"name": name, "uid": uid}}


@dataclass(frozen=True)
class ServingResult:
    """What the Topology reconciler adds to its status write."""

    fields: dict[str, Any]
    verdicts: tuple[Verdict, ...] = ()
    #: Seconds until the reconciler should look again without an event (None: events do).
    recheck: float | None = None
    events: tuple[tuple[str, str, str], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ServedTopology:
    """A Topology's ``spec.serve`` as the runner-workload pipeline sees it
    (:class:`~.workload.served.Served`)."""

    topology: sb.TopologyRef
    serve: ServeSpec
    config: OperatorConfig
    #: The Topology's ``status.createdUids`` (its served objects, as the operator made them).
    recorded: Mapping[str, str] = field(default_factory=dict)

    @property
    def target(self) -> Target:
        return sb.target_of(self.topology)

    @property
    def what(self) -> str:
        return f"served topology {self.topology.name}"

    def run_spec(self) -> RunSpec:
        return RunSpec.model_validate(
            {
                "topologyRef": {"name": self.topology.name},
                "timeoutSeconds": self.serve.task_timeout_seconds,
            }
        )

    def shape(self, rendered: RenderedBundle) -> RenderedBundle:
        """The bundle without ``spec.serve`` (replicas or tokens never change what is
        served)."""
        bundle = rendered.bundle
        topologies = {
            name: t.model_copy(update={"spec": t.spec.model_copy(update={"serve": None})})
            for name, t in bundle.topologies.items()
        }
        stripped = bundle.model_copy(update={"topologies": topologies})
        return dataclasses.replace(rendered, bundle=stripped, bundle_json=stripped.to_json())

    def bundle_config_map(self, rendered: RenderedBundle) -> dict[str, Any]:
        return sb.build_serve_config_map(self.topology, rendered)

    def manifests(self, rendered: RenderedBundle, config_map: str) -> Manifests:
        deployment, service = sb.build_serve_workload(
            topology=self.topology,
            serve=self.serve,
            rendered=rendered,
            bundle_config_map=config_map,
            config=self.config,
        )
        return Manifests(deployment, service, self.serve.port)


def _had_serving(view: Mapping[str, Any]) -> bool:
    return any(c.get("type") == SERVING for c in view["status"].get("conditions") or ())


async def _delete_workload(namespace: str, name: str) -> None:
    svc = sb.serve_name(name)
    await k8s.delete_object(k8s.apps_path("deployments", namespace, svc))
    await k8s.delete_object(k8s.core_path("services", namespace, svc))
    await egress.delete_policy(namespace, svc)


def _parse(raw: Any) -> ServeSpec | Verdict:
    try:
        return ServeSpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        message = f"spec.serve.{loc}: {err.get('msg')}" if loc else str(err.get("msg"))
        return Verdict(SERVING, "False", REASON_INVALID_SERVE_SPEC, message)


async def _unserved(
    namespace: str, name: str, view: Mapping[str, Any], deployment: Any
) -> ServingResult:
    """Without ``spec.serve``: no workload, and ``NotServed`` once anything was reported."""
    if deployment is not None:
        await _delete_workload(namespace, name)
    verdicts = (
        (Verdict(SERVING, "False", REASON_NOT_SERVED, "spec.serve is not set"),)
        if _had_serving(view)
        else ()
    )
    return ServingResult({"url": None, "serving": None, "createdUids": None}, verdicts)


async def reconcile_serving(
    ctl: Lookups,
    resolver: Resolver | None,
    config: OperatorConfig,
    namespace: str,
    name: str,
    view: Mapping[str, Any],
    ready: bool,
) -> ServingResult:
    """Make the served Deployment match ``spec.serve`` at the Topology's current version;
    every status write keeps ``status.createdUids`` (the uids of the served objects the
    operator made: what proves them its own), cleared with the workload."""
    result = await _reconcile_serving(ctl, resolver, config, namespace, name, view, ready)
    if "createdUids" in result.fields:
        if result.fields["createdUids"] is None and resolver is not None:
            resolver.ledger.forget(str(view["uid"]))
        return result
    recorded = dict(view["status"].get("createdUids") or {})
    if resolver is not None:  # what this process made since: the view may not show it yet
        target = sb.target_of(sb.TopologyRef(name, namespace, str(view["uid"])))
        recorded = resolver.ledger.recorded(target, recorded)
    return dataclasses.replace(result, fields={**result.fields, "createdUids": recorded or None})


async def _reconcile_serving(
    ctl: Lookups,
    resolver: Resolver | None,
    config: OperatorConfig,
    namespace: str,
    name: str,
    view: Mapping[str, Any],
    ready: bool,
) -> ServingResult:
    raw = (view.get("spec") or {}).get("serve")
    deployment = ctl.lookup(SERVE_DEPLOYMENTS, (namespace, name))
    if raw is None:
        return await _unserved(namespace, name, view, deployment)
    serve = _parse(raw)
    if isinstance(serve, Verdict):
        return ServingResult({}, (serve,))
    recorded = dict(view["status"].get("createdUids") or {})
    topology = sb.TopologyRef(name, namespace, str(view["uid"]))
    served = ServedTopology(topology, serve, config, recorded)
    now = _Now(str(view["status"].get("version") or ""), deployment)
    if not ready:
        now.waiting = "the Topology is not Ready"
    elif resolver is None:
        now.waiting, now.recheck = "the Runs controller has not started yet", 2.0
    else:
        stopped = await _roll_out(ctl, resolver, served, now)
        if stopped is not None:
            return stopped
    return await _verdict(ctl, served, now)


@dataclass
class _Now:
    """What one serving reconcile found so far (the version, the Deployment, why not)."""

    version: str
    deployment: Any
    waiting: str | None = None
    recheck: float | None = None
    bundle_cm: str | None = None
    created_uids: dict[str, str] | None = None


async def _roll_out(
    ctl: Lookups, resolver: Resolver, served: ServedTopology, now: _Now
) -> ServingResult | None:
    """The pipeline's steps 1 to 5; a result when it stopped for good, else ``now`` updated."""
    topology = served.topology
    key = (topology.namespace, topology.name)
    known = [b["name"] for b in ctl.lookup_all(SERVE_BUNDLES, key)]
    result = await roll_out(resolver, served, now.deployment, known)
    if isinstance(result, Stop):
        if result.waiting:  # a running Deployment keeps serving its version
            now.waiting, now.recheck = result.message, result.recheck
            return None
        if result.remove:  # never serve an older, ungated version either
            if now.deployment is not None:
                await _delete_workload(topology.namespace, topology.name)
            verdict = Verdict(SERVING, "False", result.reason, result.message)
            return ServingResult({"url": None, "serving": None, "createdUids": None}, (verdict,))
        # A running Deployment keeps its pods (a missing RuntimeClass, a tampered object).
        verdict = Verdict(SERVING, "False", result.reason, result.message)
        return ServingResult({"url": sb.card_url(topology)}, (verdict,), result.recheck)
    now.version = result.rendered.pinned.topology or now.version
    now.bundle_cm = result.config_map
    now.created_uids = dict(result.created_uids)
    if result.applied:
        log.info(
            "served topology %s/%s: applied Deployment at version %s (%s)",
            topology.namespace,
            topology.name,
            now.version,
            result.config_map,
        )
        if now.deployment is None:
            now.deployment = result.deployment
    return None


async def _verdict(ctl: Lookups, served: ServedTopology, now: _Now) -> ServingResult:
    """Step 6 (``Serving`` from the Deployment) and 7 (prune once rolled out)."""
    topology = served.topology
    key = (topology.namespace, topology.name)
    verdict, counts = sb.serving_verdict(now.deployment, now.version, now.waiting)
    if verdict.reason == REASON_NO_READY_REPLICAS:
        # Its pods may wait for a bearer token's Secret (key): only their status says so
        # (the operator reads no Secret); looked at again until a replica is ready.
        secret = await served_pipeline.secret_wait(topology.namespace, sb.selector(topology.name))
        if secret is not None:
            message = f"{verdict.message}: {secret}"
            verdict = Verdict(SERVING, "False", REASON_SECRET_NOT_FOUND, message)
        now.recheck = now.recheck or SECRET_RECHECK
    annotations = ((now.deployment or {}).get("metadata") or {}).get("annotations") or {}
    running_cm = annotations.get(sb.BUNDLE_ANNOTATION)
    if counts["updated"] and now.bundle_cm is not None and running_cm == now.bundle_cm:
        # Rolled out: older bundles pin nothing any more (their pods are gone).
        bundles = [(b["name"], b["uid"]) for b in ctl.lookup_all(SERVE_BUNDLES, key)]
        await pipeline.prune_bundles(topology.namespace, bundles, keep=now.bundle_cm)
    serving = {
        "deployment": sb.serve_name(topology.name),
        "service": sb.serve_name(topology.name),
        "bundleConfigMap": str(running_cm or now.bundle_cm or ""),
        "version": str(annotations.get(sb.VERSION_ANNOTATION) or now.version),
        **counts,
    }
    fields: dict[str, Any] = {"url": sb.card_url(topology), "serving": serving}
    if now.created_uids is not None:
        fields["createdUids"] = now.created_uids or None
    return ServingResult(fields, (verdict,), now.recheck)


__all__ = [
    "SERVE_BUNDLES",
    "SERVE_DEPLOYMENTS",
    "ServedTopology",
    "ServingResult",
    "reconcile_serving",
    IndexId.SERVE_BUNDLES,
    IndexId.SERVE_DEPLOYMENTS,
]
