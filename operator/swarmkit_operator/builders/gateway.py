"""An Agent's MCP gateway (pure: the pinned bundle and ``spec.gateway`` → manifests, status).

The gateway runs ``python -m swarmkit_runner gateway`` over the same pinned bundle a Run of
the agent would get (the Runs resolver renders it), plus ``gateway {port, tokens}``:

* the bundle ConfigMap ``gw-<agent>-<hash8>`` is content-addressed (the hash is over its
  data), immutable and owned by the Agent; it carries the ``swarmkit.dev/run`` label and
  the ``swarmkit.dev/pinned-configmaps`` annotation like a Run's bundle, so the skill,
  agent and workspace ConfigMaps it mounts are kept while it is in use; superseded ones
  are deleted once the new version is rolled out;
* the Deployment and Service ``gw-<agent>`` wrap the shared runner pod (:mod:`.pod`,
  :mod:`.workload`): the pod template pins the bundle ConfigMap and the agent version in
  its checksum annotation, so a new version (an edited granted skill, a Workspace change)
  rolls the Deployment; the tokens' Secret keys are injected by reference;
* a call through the gateway that waits for a person opens a Review itself, as the pod's
  service account: the ServiceAccount ``gw-<agent>`` (the Workspace's
  ``runtime.serviceAccountName`` when it names one) with the token mounted, and the Role
  + RoleBinding ``gw-<agent>`` allowing create, get and watch on Reviews in the agent's
  namespace and nothing else (:func:`review_rbac`);
* ``status.gatewayUrl`` is the Service's in-cluster URL (``http://gw-<agent>.<ns>.svc:
  <port>/mcp``), ``status.gatewayVersion`` the agent version every replica serves, and the
  condition ``Serving`` says whether it does (:func:`serving`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from swarmkit_api.agent import GatewaySpec
from swarmkit_api.bundle import BUNDLE_FILE, BUNDLE_MOUNT, BundleGateway, RunBundle
from swarmkit_api.conditions import (
    REASON_CREATING,
    REASON_ROLLING_OUT,
    REASON_SCALED_TO_ZERO,
    REASON_SERVING,
    REASON_STARTING,
    SERVING,
)

from ..config import OperatorConfig
from ..hashing import dns_label, sha256_hex
from . import MANAGED_BY, PINNED_ANNOTATION, RUN_LABEL
from .bundle import RenderedBundle
from .job import label_value
from .pod import pod_template, runner_pod_spec, runtime_class
from .tracing import serving_env
from .workload import build_deployment, build_service, deployment_readiness, service_url

GATEWAY_LABEL = "swarmkit.dev/gateway"
AGENT_VERSION_LABEL = "swarmkit.dev/agent-version"
COMPONENT = {"app.kubernetes.io/name": "swarmkit-runner", "app.kubernetes.io/component": "gateway"}
MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
PORT_NAME = "mcp"


@dataclass(frozen=True)
class AgentRef:
    """The Agent that owns the gateway."""

    name: str
    namespace: str
    uid: str
    generation: int = 0


def gateway_name(agent: str) -> str:
    """``gw-<agent>``: the Deployment and the Service (a DNS label: hashed past 63)."""
    return dns_label(f"gw-{agent}")


def owner_reference(agent: AgentRef) -> dict[str, Any]:
    return {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Agent",
        "name": agent.name,
        "uid": agent.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def service_account(agent: str, rendered: RenderedBundle) -> str:
    """The gateway pod's service account: the Workspace's, else ``gw-<agent>``."""
    runtime = rendered.bundle.workspace.runtime
    named = runtime.service_account_name if runtime is not None else None
    return named or gateway_name(agent)


#: What a gateway may do with the API: open Reviews and follow their decisions.
REVIEW_RULES = [
    {"apiGroups": ["swarmkit.dev"], "resources": ["reviews"], "verbs": ["create", "get", "watch"]}
]


def review_rbac(agent: AgentRef, account: str) -> list[dict[str, Any]]:
    """The ServiceAccount (unless the Workspace names its own), Role and RoleBinding that
    let the gateway open Reviews in its namespace (owned by the Agent)."""
    name = gateway_name(agent.name)
    meta = {
        "namespace": agent.namespace,
        "labels": {**MANAGED_BY, **COMPONENT, **selector(agent.name)},
        "ownerReferences": [owner_reference(agent)],
    }
    docs: list[dict[str, Any]] = []
    if account == name:
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, **meta},
                "automountServiceAccountToken": False,  # only the gateway pod mounts it
            }
        )
    docs.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, **meta},
            "rules": REVIEW_RULES,
        }
    )
    docs.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, **meta},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": agent.namespace}],
        }
    )
    return docs


def selector(agent: str) -> dict[str, str]:
    return {GATEWAY_LABEL: label_value(agent), "app.kubernetes.io/component": "gateway"}


def gateway_bundle(rendered: RenderedBundle, spec: GatewaySpec) -> RunBundle:
    """The rendered Agent bundle with the gateway's port and tokens."""
    assert spec.auth is not None
    gateway = BundleGateway(
        port=spec.port,
        tokens=list(spec.auth.tokens),
        review_timeout_seconds=spec.review_timeout_seconds,
    )
    return rendered.bundle.model_copy(update={"gateway": gateway})


def bundle_config_map(
    agent: AgentRef, rendered: RenderedBundle, bundle: RunBundle
) -> dict[str, Any]:
    """The gateway's immutable, content-addressed bundle ConfigMap."""
    data = {BUNDLE_FILE: bundle.to_json(), **rendered.flow_data}
    digest = sha256_hex(json.dumps(data, sort_keys=True))[:8]
    name = dns_label(f"gw-{agent.name}", f"-{digest}")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": agent.namespace,
            "labels": {
                **MANAGED_BY,
                **selector(agent.name),
                RUN_LABEL: gateway_name(agent.name),
                AGENT_VERSION_LABEL: label_value(bundle.agents[agent.name].version),
            },
            "annotations": {PINNED_ANNOTATION: ",".join(rendered.pinned_config_maps)},
            "ownerReferences": [owner_reference(agent)],
        },
        "immutable": True,
        "data": data,
    }


def workload(
    agent: AgentRef,
    spec: GatewaySpec,
    rendered: RenderedBundle,
    bundle: RunBundle,
    config_map: str,
    config: OperatorConfig,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The gateway's Deployment and Service."""
    assert spec.auth is not None
    version = bundle.agents[agent.name].version
    pod = runner_pod_spec(
        workspace=bundle.workspace,
        config=config,
        args=["gateway", "--bundle", BUNDLE_MOUNT, "--port", str(spec.port)],
        bundle_config_map=config_map,
        skill_mounts=rendered.skill_mounts,
        flow_data_keys=rendered.flow_data_keys,
        restart_policy="Always",
        runtime_class_name=runtime_class(bundle),
        resource_override=spec.resources,
        extra_secret_env=[t.secret_key_ref for t in spec.auth.tokens],
        extra_env=serving_env(bundle.workspace.tracing),  # tracing hook
        ports=[{"name": PORT_NAME, "containerPort": spec.port, "protocol": "TCP"}],
        probes={
            "readinessProbe": {
                "httpGet": {"path": HEALTH_PATH, "port": PORT_NAME},
                "periodSeconds": 5,
            },
            "livenessProbe": {
                "httpGet": {"path": HEALTH_PATH, "port": PORT_NAME},
                "periodSeconds": 20,
                "failureThreshold": 6,
            },
        },
        termination_grace_seconds=30,
        service_account_name=service_account(agent.name, rendered),
        api_access=True,
    )
    labels = {**MANAGED_BY, **COMPONENT, **selector(agent.name)}
    pod_labels = {**labels, AGENT_VERSION_LABEL: label_value(version)}
    template = pod_template(pod, labels=pod_labels)
    name = gateway_name(agent.name)
    owner = owner_reference(agent)
    deployment = build_deployment(
        name=name,
        namespace=agent.namespace,
        labels=labels,
        selector=selector(agent.name),
        owner=owner,
        replicas=spec.replicas,
        template=template,
        pins=[config_map, version],
        annotations={AGENT_VERSION_LABEL: version},
    )
    service = build_service(
        name=name,
        namespace=agent.namespace,
        labels=labels,
        selector=selector(agent.name),
        owner=owner,
        port=spec.port,
        target_port=PORT_NAME,
        port_name=PORT_NAME,
    )
    return deployment, service


def gateway_url(agent: AgentRef, spec: GatewaySpec) -> str:
    return service_url(gateway_name(agent.name), agent.namespace, spec.port, MCP_PATH)


@dataclass(frozen=True)
class Serving:
    """The ``Serving`` condition and the status fields that go with it."""

    status: str
    reason: str
    message: str
    #: The agent version every replica serves (None while rolling or down).
    version: str | None = None
    rolled: bool = False


def serving(deployment: Mapping[str, Any] | None, version: str) -> Serving:
    """What the observed Deployment says about the gateway of agent ``version``."""
    if deployment is None:
        return Serving("False", REASON_CREATING, "the gateway Deployment is being created")
    ready, desired, rolled = deployment_readiness(deployment)
    template = (deployment.get("spec") or {}).get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    current = labels.get(AGENT_VERSION_LABEL) == label_value(version)
    if desired == 0:
        return Serving("False", REASON_SCALED_TO_ZERO, "spec.gateway.replicas is 0", rolled=rolled)
    if rolled and current:
        message = f"{ready}/{desired} replica(s) serve agent version {version}"
        return Serving("True", REASON_SERVING, message, version, rolled=True)
    if ready > 0:
        return Serving(
            "True",
            REASON_ROLLING_OUT,
            f"rolling out agent version {version}; {ready}/{desired} replica(s) ready",
        )
    return Serving(
        "False", REASON_STARTING, f"0/{desired} replica(s) ready (agent version {version})"
    )


__all__ = [
    "GATEWAY_LABEL",
    "SERVING",
    "AgentRef",
    "Serving",
    "bundle_config_map",
    "gateway_bundle",
    "gateway_name",
    "gateway_url",
    "review_rbac",
    "selector",
    "service_account",
    "serving",
    "workload",
]
