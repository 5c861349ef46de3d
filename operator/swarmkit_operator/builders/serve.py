"""A served Topology (pure: the pinned bundle and ``spec.serve`` → ConfigMap, Deployment, Service).

``spec.serve`` runs the runner's A2A server (``python -m swarmkit_runner serve``) as a
Deployment ``serve-<topology>`` behind a Service of the same name, pinned to the
Topology's version exactly like a Run:

* the bundle is rendered by the same resolver and :func:`~.bundle.render_bundle` as a Run's
  (target: the Topology; run name ``serve-<topology>``, uid = the Topology's uid, timeout =
  ``serve.taskTimeoutSeconds``) into the immutable, content-addressed ConfigMap
  ``serve-<topology>-<hash8>``, owned by the Topology. It carries the ``swarmkit.dev/run``
  label and the pinned-ConfigMaps annotation, so the renders it pins survive garbage
  collection while it exists; the operator deletes it once a newer version rolled out;
* the pod is the shared runner pod (:mod:`.pod`) with ``serve`` arguments, the bearer
  tokens as env ``SWARMKIT_SECRET_SERVE_TOKEN_<n>`` (``secretKeyRef``), the container port, an
  HTTP readiness probe (``/readyz``: fails while draining) and liveness probe
  (``/healthz``), and ``terminationGracePeriodSeconds`` = ``drainSeconds`` + 15;
* the Deployment (:mod:`.workload`) carries the checksum annotation over the template and
  the pinned versions, so a new topology version (a skill edit changes its agents'
  versions and so the topology's) rolls it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from swarmkit_api.bundle import BUNDLE_FILE, BUNDLE_MOUNT, SERVE_TOKEN_ENV_PREFIX
from swarmkit_api.conditions import (
    REASON_NO_READY_REPLICAS,
    REASON_PENDING,
    REASON_ROLLING_OUT,
    REASON_SCALED_TO_ZERO,
    REASON_SERVING,
    REASON_STALE,
    SERVING,
)
from swarmkit_api.topology import ServeSpec

from ..config import OperatorConfig
from ..hashing import dns_label, sha256_hex
from . import MANAGED_BY, PINNED_ANNOTATION, RUN_LABEL, Verdict
from .bundle import RenderedBundle
from .job import TOPOLOGY_LABEL, TOPOLOGY_VERSION_LABEL, label_value
from .pod import pod_template, runner_pod_spec, runtime_class
from .tracing import serving_env
from .workload import (
    build_deployment,
    build_service,
    deployment_readiness,
    service_url,
)

#: On every object of a served topology: the Topology's name.
SERVE_LABEL = "swarmkit.dev/serve"
BUNDLE_ANNOTATION = "swarmkit.dev/bundle-config-map"
VERSION_ANNOTATION = "swarmkit.dev/topology-version"
TOKEN_ENV_PREFIX = SERVE_TOKEN_ENV_PREFIX
CARD_PATH = "/.well-known/agent-card.json"
SERVICE_PORT = 80
#: The pod gets this much longer than drainSeconds before it is killed.
DRAIN_MARGIN_SECONDS = 15
MAX_NAME = 63


@dataclass(frozen=True)
class TopologyRef:
    """The served Topology: identity for names, labels and the ownerReference."""

    name: str
    namespace: str
    uid: str


def serve_name(topology: str) -> str:
    """``serve-<topology>``: the Deployment and the Service (a DNS label, hashed past 54
    characters: the bundle ConfigMap appends ``-<hash8>`` and stays within 63)."""
    return dns_label(f"serve-{topology}", limit=MAX_NAME - 9)


def bundle_hash(rendered: RenderedBundle) -> str:
    """The content hash of a served bundle (bundle.json and its flow data)."""
    data = rendered.bundle_json or rendered.bundle.to_json()
    parts = [data, *(f"{k}={v}" for k, v in sorted(rendered.flow_data.items()))]
    return sha256_hex("\n".join(parts))


def bundle_config_map_name(topology: str, rendered: RenderedBundle) -> str:
    return f"{serve_name(topology)}-{bundle_hash(rendered)[:8]}"


def owner_reference(topology: TopologyRef) -> dict[str, Any]:
    return {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Topology",
        "name": topology.name,
        "uid": topology.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def serve_labels(topology: str) -> dict[str, str]:
    return {
        **MANAGED_BY,
        "app.kubernetes.io/name": "swarmkit-runner",
        "app.kubernetes.io/component": "serve",
        SERVE_LABEL: label_value(topology),
    }


def selector(topology: str) -> dict[str, str]:
    return {SERVE_LABEL: label_value(topology), "app.kubernetes.io/component": "serve"}


def build_serve_config_map(topology: TopologyRef, rendered: RenderedBundle) -> dict[str, Any]:
    """The immutable, content-addressed bundle ConfigMap the served pods mount."""
    labels = serve_labels(topology.name)
    # The GC keeps what a bundle labelled like a Run's pins (until it is deleted).
    labels[RUN_LABEL] = label_value(serve_name(topology.name))
    data = {BUNDLE_FILE: rendered.bundle_json or rendered.bundle.to_json(), **rendered.flow_data}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": bundle_config_map_name(topology.name, rendered),
            "namespace": topology.namespace,
            "labels": labels,
            "annotations": {PINNED_ANNOTATION: ",".join(rendered.pinned_config_maps)},
            "ownerReferences": [{**owner_reference(topology), "controller": False}],
        },
        "immutable": True,
        "data": data,
    }


def runner_args(serve: ServeSpec) -> list[str]:
    return [
        "serve",
        "--bundle",
        BUNDLE_MOUNT,
        "--port",
        str(serve.port),
        "--max-concurrent-tasks",
        str(serve.max_concurrent_tasks),
        "--drain-seconds",
        str(serve.drain_seconds),
        "--input-timeout",
        str(serve.input_timeout_seconds),
    ]


def token_env(serve: ServeSpec) -> list[dict[str, Any]]:
    """The accepted bearer tokens, by reference only."""
    return [
        {
            "name": f"{TOKEN_ENV_PREFIX}{i}",
            "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
        }
        for i, ref in enumerate(serve.auth.bearer_tokens)
    ]


def build_serve_workload(
    *,
    topology: TopologyRef,
    serve: ServeSpec,
    rendered: RenderedBundle,
    bundle_config_map: str,
    config: OperatorConfig,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Deployment and the Service serving ``topology`` at the pinned bundle."""
    name = serve_name(topology.name)
    version = rendered.pinned.topology or ""
    spec = runner_pod_spec(
        workspace=rendered.bundle.workspace,
        config=config,
        args=runner_args(serve),
        bundle_config_map=bundle_config_map,
        skill_mounts=rendered.skill_mounts,
        flow_data_keys=rendered.flow_data_keys,
        restart_policy="Always",
        runtime_class_name=runtime_class(rendered.bundle),
        resource_override=serve.resources,
        extra_env=[
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            *token_env(serve),
            *serving_env(rendered.bundle.workspace.tracing),  # tracing hook
        ],
        ports=[{"name": "http", "containerPort": serve.port, "protocol": "TCP"}],
        probes={
            "readinessProbe": {
                "httpGet": {"path": "/readyz", "port": "http"},
                "periodSeconds": 2,
                "failureThreshold": 1,
            },
            "livenessProbe": {
                "httpGet": {"path": "/healthz", "port": "http"},
                "periodSeconds": 10,
                "failureThreshold": 3,
            },
        },
        termination_grace_seconds=serve.drain_seconds + DRAIN_MARGIN_SECONDS,
    )
    pod_labels = {**serve_labels(topology.name), TOPOLOGY_LABEL: label_value(topology.name)}
    if version:
        pod_labels[TOPOLOGY_VERSION_LABEL] = label_value(version)
    annotations = {BUNDLE_ANNOTATION: bundle_config_map, VERSION_ANNOTATION: version}
    template = pod_template(spec, labels=pod_labels, annotations=annotations)
    pins = [f"topology={version}"]
    pins += [f"agent:{k}={v}" for k, v in sorted(rendered.pinned.agents.items())]
    pins += [f"skill:{k}={v}" for k, v in sorted(rendered.pinned.skills.items())]
    labels = serve_labels(topology.name)
    owner = owner_reference(topology)
    deployment = build_deployment(
        name=name,
        namespace=topology.namespace,
        labels=labels,
        selector=selector(topology.name),
        owner=owner,
        replicas=serve.replicas,
        template=template,
        pins=pins,
        annotations={VERSION_ANNOTATION: version, BUNDLE_ANNOTATION: bundle_config_map},
    )
    service = build_service(
        name=name,
        namespace=topology.namespace,
        labels=labels,
        selector=selector(topology.name),
        owner=owner,
        port=SERVICE_PORT,
        target_port="http",
    )
    return deployment, service


def card_url(topology: TopologyRef) -> str:
    """The in-cluster URL of the served Agent Card."""
    url = service_url(serve_name(topology.name), topology.namespace, SERVICE_PORT, CARD_PATH)
    return url.replace(f":{SERVICE_PORT}/", "/", 1)


def serving_verdict(
    deployment: Mapping[str, Any] | None, version: str, waiting: str | None = None
) -> tuple[Verdict, dict[str, Any]]:
    """The ``Serving`` condition and the ``status.serving`` counts from the Deployment.

    True when at least one replica is ready (the card answers); the message says how many
    of how many, and whether the rollout to ``version`` is still going on. ``waiting``:
    why the current version cannot be rolled out yet (the old one keeps serving).
    """
    ready, desired, rolled = deployment_readiness(deployment)
    annotations = ((deployment or {}).get("metadata") or {}).get("annotations") or {}
    running = str(annotations.get(VERSION_ANNOTATION) or "")
    updated = rolled and running == version
    counts = {"replicas": desired, "readyReplicas": ready, "updated": updated}
    if deployment is None:
        message = waiting or "creating the Deployment"
        return Verdict(SERVING, "False", REASON_PENDING, message), counts
    text = f"{ready}/{desired} replicas ready"
    if desired == 0:
        return Verdict(SERVING, "False", REASON_SCALED_TO_ZERO, "spec.serve.replicas is 0"), counts
    if waiting:
        text += f"; version {running or '?'} keeps serving: {waiting}"
    elif not updated:
        text += f"; rolling out version {version}"
    if ready == 0:
        return Verdict(SERVING, "False", REASON_NO_READY_REPLICAS, text), counts
    reason = (
        REASON_SERVING
        if updated and not waiting
        else REASON_ROLLING_OUT
        if not waiting
        else REASON_STALE
    )
    return Verdict(SERVING, "True", reason, text), counts


__all__ = [
    "CARD_PATH",
    "SERVE_LABEL",
    "TOKEN_ENV_PREFIX",
    "TopologyRef",
    "build_serve_config_map",
    "build_serve_workload",
    "bundle_config_map_name",
    "card_url",
    "serve_name",
    "serving_verdict",
]
