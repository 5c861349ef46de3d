"""Serving a Topology over A2A (``spec.serve``): the I/O around :mod:`.builders.serve`.

Run by the Topology reconciler (so one writer owns the Topology's status): it resolves the
topology exactly as a Run would (the Runs controller's resolver: indexes + immutable
rendered ConfigMaps), creates the content-addressed bundle ConfigMap, server-side applies
the Deployment and Service when their checksum or replica count differs from what the
Deployments index shows, and reports the Deployment's readiness as the ``Serving``
condition, ``status.serving`` and ``status.url``.

While the topology is not Ready (or its new version cannot be resolved yet) the running
Deployment is left alone: the pinned old version keeps serving, and the condition says why
the new one is not rolled out. Once a version has rolled out completely, the bundle
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
    REASON_FUNNEL_NOT_SERVABLE,
    REASON_INVALID_SERVE_SPEC,
    REASON_NOT_SERVED,
    REASON_RUNTIME_CLASS_NOT_FOUND,
    REASON_SECRET_NOT_FOUND,
    SERVING,
)
from swarmkit_api.run import RunSpec
from swarmkit_api.topology import ServeSpec

from . import egress, k8s, sandbox
from .builders import Verdict, unservable
from .builders import serve as sb
from .builders.bundle import RenderedBundle
from .builders.workload import CHECKSUM_ANNOTATION
from .config import OperatorConfig
from .indexes import PRESENT, index
from .runs.model import RunView
from .runs.resolve import Resolver, Waiting

log = logging.getLogger("swarmkit_operator.serving")

SERVE_DEPLOYMENTS = "serve_deployments"
SERVE_BUNDLES = "serve_bundles"


class Lookups(Protocol):
    """What the reconcile controller offers this module (its index lookups)."""

    def lookup(self, index: str, key: Any) -> Any: ...

    def lookup_all(self, index: str, key: Any) -> list[Any]: ...


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
    """(namespace, topology) → the served Deployment's spec replicas, status, annotations."""
    meta = body.get("metadata") or {}
    template = ((body.get("spec") or {}).get("template") or {}).get("metadata") or {}
    summary = {
        "metadata": {
            "name": meta.get("name"),
            "generation": meta.get("generation"),
            "annotations": dict(meta.get("annotations") or {}),
        },
        "spec": {"replicas": (body.get("spec") or {}).get("replicas", 1)},
        "status": dict(body.get("status") or {}),
        "checksum": (template.get("annotations") or {}).get(CHECKSUM_ANNOTATION),
    }
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


def _strip_serve(rendered: RenderedBundle) -> RenderedBundle:
    """The bundle without ``spec.serve`` (replicas or tokens never change what is served)."""
    bundle = rendered.bundle
    topologies = {
        name: t.model_copy(update={"spec": t.spec.model_copy(update={"serve": None})})
        for name, t in bundle.topologies.items()
    }
    stripped = bundle.model_copy(update={"topologies": topologies})
    return dataclasses.replace(rendered, bundle=stripped, bundle_json=stripped.to_json())


def _had_serving(view: Mapping[str, Any]) -> bool:
    return any(c.get("type") == SERVING for c in view["status"].get("conditions") or ())


async def _delete_workload(namespace: str, name: str) -> None:
    svc = sb.serve_name(name)
    await k8s.delete_object(k8s.apps_path("deployments", namespace, svc))
    await k8s.delete_object(k8s.core_path("services", namespace, svc))
    await egress.delete_policy(namespace, svc)


async def reconcile_serving(
    ctl: Lookups,
    resolver: Resolver | None,
    config: OperatorConfig,
    namespace: str,
    name: str,
    view: Mapping[str, Any],
    ready: bool,
) -> ServingResult:
    """Make the served Deployment match ``spec.serve`` at the Topology's current version."""
    raw = (view.get("spec") or {}).get("serve")
    deployment = ctl.lookup(SERVE_DEPLOYMENTS, (namespace, name))
    if raw is None:
        if deployment is not None:
            await _delete_workload(namespace, name)
        verdicts = (
            (Verdict(SERVING, "False", REASON_NOT_SERVED, "spec.serve is not set"),)
            if _had_serving(view)
            else ()
        )
        return ServingResult({"url": None, "serving": None}, verdicts)
    try:
        serve = ServeSpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        message = f"spec.serve.{loc}: {err.get('msg')}" if loc else str(err.get("msg"))
        return ServingResult({}, (Verdict(SERVING, "False", REASON_INVALID_SERVE_SPEC, message),))
    topology = sb.TopologyRef(name, namespace, str(view["uid"]))
    waiting: str | None = None
    recheck: float | None = None
    version = str(view["status"].get("version") or "")
    missing = [
        f"{ref.name}/{ref.key}"
        for ref in serve.auth.bearer_tokens
        if ref.key not in (ctl.lookup("secret_keys", (namespace, ref.name)) or ())
    ]
    bundle_cm: str | None = None
    if missing:
        message = f"bearer token Secret key(s) not found: {', '.join(missing)}"
        if deployment is None:
            return ServingResult(
                {"url": sb.card_url(topology)},
                (Verdict(SERVING, "False", REASON_SECRET_NOT_FOUND, message),),
            )
        waiting = message
    elif not ready:
        waiting = "the Topology is not Ready"
    elif resolver is None:
        waiting, recheck = "the Runs controller has not started yet", 2.0
    else:
        run = RunView(
            name=sb.serve_name(name),
            namespace=namespace,
            uid=topology.uid,
            generation=1,
            spec={},
            status={},
            labels={},
            deleting=False,
            resource_version=0,
        )
        spec = RunSpec.model_validate(
            {"topologyRef": {"name": name}, "timeoutSeconds": serve.task_timeout_seconds}
        )
        resolution = await resolver.resolve(run, spec)
        if isinstance(resolution, Waiting):
            waiting, recheck = resolution.message, resolution.recheck
        else:
            rendered = _strip_serve(resolution.rendered)
            refused = unservable.refusal(rendered.bundle, f"served topology {name}")
            if refused is not None:  # never serve an older, ungated version either
                if deployment is not None:
                    await _delete_workload(namespace, name)
                verdict = Verdict(SERVING, "False", REASON_FUNNEL_NOT_SERVABLE, refused)
                return ServingResult({"url": None, "serving": None}, (verdict,))
            missing_rc = await sandbox.missing_runtime_class(rendered.bundle)
            if missing_rc is not None:  # a running Deployment keeps its pods
                return ServingResult(
                    {"url": sb.card_url(topology)},
                    (Verdict(SERVING, "False", REASON_RUNTIME_CLASS_NOT_FOUND, missing_rc),),
                    sandbox.RECHECK_SECONDS,
                )
            version = rendered.pinned.topology or version
            cm = sb.build_serve_config_map(topology, rendered)
            bundle_cm = str(cm["metadata"]["name"])
            known = {b["name"] for b in ctl.lookup_all(SERVE_BUNDLES, (namespace, name))}
            if bundle_cm not in known:
                await k8s.create_config_map(cm)
            dep, svc = sb.build_serve_workload(
                topology=topology,
                serve=serve,
                rendered=rendered,
                bundle_config_map=bundle_cm,
                config=config,
            )
            want = dep["spec"]["template"]["metadata"]["annotations"][CHECKSUM_ANNOTATION]
            have = (deployment or {}).get("checksum")
            have_replicas = ((deployment or {}).get("spec") or {}).get("replicas")
            if deployment is None or have != want or have_replicas != serve.replicas:
                await egress.apply_workload_policy(dep, rendered.bundle, serve.port)
                applied = await k8s.apply(
                    k8s.apps_path("deployments", namespace, sb.serve_name(name)), dep
                )
                await k8s.apply(k8s.core_path("services", namespace, sb.serve_name(name)), svc)
                log.info(
                    "served topology %s/%s: applied Deployment at version %s (%s)",
                    namespace,
                    name,
                    version,
                    bundle_cm,
                )
                if deployment is None:
                    deployment = serve_deployments(
                        applied, namespace, applied["metadata"]["labels"]
                    )[(namespace, applied["metadata"]["labels"][sb.SERVE_LABEL])]
    verdict, counts = sb.serving_verdict(deployment, version, waiting)
    running_cm = (((deployment or {}).get("metadata") or {}).get("annotations") or {}).get(
        sb.BUNDLE_ANNOTATION
    )
    if counts["updated"] and bundle_cm is not None and running_cm == bundle_cm:
        # Rolled out: older bundles pin nothing any more (their pods are gone).
        for old in ctl.lookup_all(SERVE_BUNDLES, (namespace, name)):
            if old["name"] != bundle_cm:
                await k8s.delete_config_map(namespace, old["name"], old["uid"])
    running_version = (((deployment or {}).get("metadata") or {}).get("annotations") or {}).get(
        sb.VERSION_ANNOTATION
    )
    serving = {
        "deployment": sb.serve_name(name),
        "service": sb.serve_name(name),
        "bundleConfigMap": str(running_cm or bundle_cm or ""),
        "version": str(running_version or version),
        **counts,
    }
    return ServingResult({"url": sb.card_url(topology), "serving": serving}, (verdict,), recheck)


__all__ = [
    "SERVE_BUNDLES",
    "SERVE_DEPLOYMENTS",
    "ServingResult",
    "reconcile_serving",
    "serve_bundles",
    "serve_deployments",
]
