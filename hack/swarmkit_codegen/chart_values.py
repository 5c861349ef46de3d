"""The Helm chart's values as a pydantic model: the one source of ``values.schema.json``.

``charts/swarmkit-operator/values.yaml`` is written by hand (it is documentation: every key
carries a comment); ``tests/unit/test_chart_values.py`` checks that it equals this model's
defaults and that every key is commented. ``values_schema()`` turns the model into the JSON
Schema Helm validates ``values.yaml`` + ``--set``/``-f`` overrides against before rendering
(``helm install``, ``helm upgrade``, ``helm template``, ``helm lint``), so a typo'd key
(``replicas:``), a non-hex script pin or a negative port fails with the field's path, e.g.
``at '/config/security/skills/allowed/0/sha256': 'abc' does not match pattern ...``.

The ``config`` section is what the operator reads at start-up (``swarmkit_operator.config``);
its rules here mirror ``config.parse_config`` (tests check the two agree).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from swarmkit_api.base import ApiModel
from swarmkit_api.common import KEBAB

CHART_DIR = Path("charts/swarmkit-operator")
SCHEMA_PATH = CHART_DIR / "values.schema.json"

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
SHA256 = r"^[0-9a-fA-F]{64}$"
DIGEST = r"^(sha256:[0-9a-f]{64})?$"
# A skill-relative file path: no leading '/' and no '..' segment (the CRD enforces the same).
SKILL_PATH = r"^[^/\\].*$"
DOTDOT_SEGMENT = r"(^|/)\.\.(/|$)"
DURATION = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"

FreeForm = dict[str, Any]


def _desc(text: str) -> Any:
    return Field(description=text)


class _Values(ApiModel):
    """Base of the values models: camelCase keys, unknown keys rejected, no coercion
    ("true" is not a boolean, "2" is not a number), exactly as the JSON Schema behaves."""

    model_config = ApiModel.model_config | {"strict": True}


Namespace = Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]


class ImageValues(_Values):
    """A container image: repository, tag (default: the chart's appVersion) or digest."""

    repository: str = Field(min_length=1, description="Image repository, without tag.")
    tag: str = Field(
        default="",
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$|^$",
        description="Image tag; empty means the chart's appVersion.",
    )
    digest: str = Field(
        default="",
        pattern=DIGEST,
        description="Image digest (sha256:<64 hex>); when set it is used instead of the tag.",
    )


class OperatorImageValues(ImageValues):
    """The operator image."""

    repository: str = Field(
        default="ghcr.io/swarmkit-operator/swarmkit-operator",
        min_length=1,
        description="Operator image repository, without tag.",
    )
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="Kubernetes imagePullPolicy."
    )


class RuntimeImageValues(ImageValues):
    """The default runtime image of Run Jobs (a Workspace's spec.runtime.image overrides it)."""

    repository: str = Field(
        default="ghcr.io/swarmkit-operator/swarmkit-runtime",
        min_length=1,
        description="Runtime image repository, without tag.",
    )


class CrdValues(_Values):
    """CustomResourceDefinitions shipped in templates/crds (generated from the models)."""

    install: bool = _desc("Install the six swarmkit.dev CRDs with the chart.")
    keep: bool = _desc(
        "Annotate the CRDs helm.sh/resource-policy: keep so `helm uninstall` leaves them "
        "(and with them every Skill, Agent, Topology, Workspace and Run) in place."
    )


class AllowedScript(_Values):
    """One approved script: the operator runs it only while its content hashes to sha256."""

    namespace: str = Field(
        default="",
        pattern=r"^$|" + DNS_LABEL,
        max_length=63,
        description="Namespace of the Skill; empty means the skill of that name in any namespace.",
    )
    skill: str = Field(pattern=KEBAB, max_length=63, description="Skill name.")
    path: str = Field(
        pattern=SKILL_PATH,
        max_length=253,
        description="Path of the script inside the skill, e.g. scripts/classify.py.",
        json_schema_extra={"not": {"pattern": DOTDOT_SEGMENT}},
    )
    sha256: str = Field(
        pattern=SHA256, description="sha256 of the script content (64 hex digits): the pin."
    )

    @field_validator("path")
    @classmethod
    def _inside_skill(cls, path: str) -> str:
        if re.search(DOTDOT_SEGMENT, path):
            raise ValueError("path must stay inside the skill (no '..' segment)")
        return path


class SkillSecurityValues(_Values):
    """Script approval: the only place skill scripts become runnable."""

    allow_script_execution: bool = _desc(
        "Master switch: when false no bundled script runs, whatever the allow-list says."
    )
    allowed: list[AllowedScript] = _desc("Allow-list of pinned scripts.")


class SecurityValues(_Values):
    """Security settings of the operator."""

    skills: SkillSecurityValues = _desc("Skill script approval.")


class SkillLibraryValues(_Values):
    """The skill library: usage roll-ups and version history of every Skill."""

    history_limit: int = Field(
        ge=1,
        le=100,
        description="Content hashes kept per Skill in its version history (also after the "
        "Skill is deleted).",
    )


class OperatorConfigValues(_Values):
    """The operator configuration file (ConfigMap, mounted, read at start-up)."""

    security: SecurityValues = _desc("Script approvals.")
    skill_library: SkillLibraryValues = _desc("Skill library settings.")
    max_job_recreations: int = Field(
        ge=0,
        le=100,
        description="How often a Run's Job that disappeared is recreated before the Run fails "
        "with JobLost.",
    )


class LeaderElectionValues(_Values):
    """Leader election on a Lease (client-go's semantics): only the holder writes."""

    lease_name: str = Field(
        default="",
        max_length=63,
        description="The Lease's name; empty means the release's full name.",
        json_schema_extra={"pattern": "^$|" + DNS_LABEL},
    )
    lease_duration_seconds: int = Field(
        ge=2,
        le=600,
        description="Seconds a standby waits, after it last saw the Lease renewed, before "
        "taking it.",
    )
    renew_deadline_seconds: int = Field(
        ge=1,
        le=599,
        description="Seconds the leader keeps writing without a successful renewal.",
    )
    retry_period_seconds: int = Field(
        ge=1, le=60, description="Seconds between renewals and standby attempts."
    )

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElectionValues:
        if not (
            self.lease_duration_seconds
            > self.renew_deadline_seconds
            > self.retry_period_seconds * 1.2
        ):
            raise ValueError(
                "leaderElection: leaseDurationSeconds > renewDeadlineSeconds > "
                "1.2 x retryPeriodSeconds must hold"
            )
        return self


class LoggingValues(_Values):
    """Operator log output."""

    format: Literal["json", "plain", "full"] = _desc(
        "json (structured, one object a line), plain or full (kopf's log formats)."
    )
    verbose: bool = _desc("Debug logging (`--verbose`).")


class ServiceAccountValues(_Values):
    """The operator's ServiceAccount."""

    create: bool = _desc("Create the ServiceAccount.")
    name: str = Field(
        pattern=r"^$|" + DNS_LABEL,
        max_length=63,
        description="Name; empty means the release's full name.",
    )
    annotations: dict[str, str] = _desc("Annotations, e.g. for workload identity.")


class RbacValues(_Values):
    """RBAC for the operator and for users."""

    create: bool = _desc(
        "Create the operator's (Cluster)Role and binding. With watchNamespaces set they are a "
        "Role + RoleBinding per namespace plus a small ClusterRole (RuntimeClass get)."
    )
    aggregate_to_user_roles: bool = _desc(
        "Create ClusterRoles aggregated into the built-in view, edit and admin roles: view "
        "reads all six kinds, edit writes Skills, Agents, Topologies and Runs, only admin "
        "writes Workspaces."
    )
    reviewer_role: bool = _desc(
        "Create the aggregated ClusterRole swarmkit-reviewer (answer Reviews: patch "
        "spec.decision). Bind it to the people who may decide; edit and admin cannot decide."
    )


class ReviewValues(_Values):
    """Human review of parked Runs and swarm-authored Skills."""

    admission_policy: bool = _desc(
        "Install the ValidatingAdmissionPolicy swarmkit-review-decisions (+ binding): a "
        "decision's decidedBy must be the authenticated user, a decision is final, an expired "
        "review cannot be decided; and swarmkit-mailbox-acknowledgements: a mailbox item's "
        "acknowledgement.by must be the authenticated user. Needs Kubernetes 1.30+."
    )


class ProbeValues(_Values):
    """Probe timing (the endpoint is kopf's liveness endpoint on health.port)."""

    initial_delay_seconds: int = Field(ge=0, description="initialDelaySeconds.")
    period_seconds: int = Field(ge=1, description="periodSeconds.")
    timeout_seconds: int = Field(ge=1, description="timeoutSeconds.")
    failure_threshold: int = Field(ge=1, description="failureThreshold.")


class HealthValues(_Values):
    """kopf's liveness endpoint (`--liveness=http://0.0.0.0:<port><path>`)."""

    port: int = Field(ge=1024, le=65535, description="Port of the health endpoint.")
    path: str = Field(pattern=r"^/", description="Path of the health endpoint.")


class ServiceMonitorValues(_Values):
    """A prometheus-operator ServiceMonitor for the metrics Service."""

    enabled: bool = _desc("Create the ServiceMonitor (needs the monitoring.coreos.com CRDs).")
    interval: str = Field(pattern=DURATION, description="Scrape interval, e.g. 30s.")
    scrape_timeout: str = Field(
        pattern=r"^$|" + DURATION, description="Scrape timeout; empty = Prometheus default."
    )
    labels: dict[str, str] = _desc("Extra labels (e.g. the release label your Prometheus selects).")


class MetricsServiceValues(_Values):
    """The metrics Service."""

    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = _desc("Service type.")
    port: int = Field(ge=1, le=65535, description="Service port.")
    annotations: dict[str, str] = _desc("Service annotations (e.g. prometheus.io/scrape).")


class MetricsValues(_Values):
    """Prometheus metrics (reconciles by kind and outcome, latency, objects by condition)."""

    enabled: bool = _desc("Expose /metrics and create the metrics Service.")
    port: int = Field(ge=1024, le=65535, description="Container port of /metrics.")
    service: MetricsServiceValues = _desc("The metrics Service.")
    service_monitor: ServiceMonitorValues = _desc("Optional ServiceMonitor.")


class NetworkPolicyValues(_Values):
    """An optional NetworkPolicy around the operator pod."""

    enabled: bool = _desc("Create the NetworkPolicy.")
    api_server_cidrs: list[str] = Field(
        description="CIDRs of the kube-apiserver endpoints the operator may reach; empty "
        "allows egress on apiServerPorts to any address.",
    )
    api_server_ports: list[int] = Field(
        min_length=1, description="Ports of the kube-apiserver (443 for the Service, 6443 ...)."
    )
    metrics_from: list[FreeForm] = _desc(
        "NetworkPolicyPeers allowed to scrape metrics; empty allows any source."
    )
    allow_dns: bool = _desc("Allow egress to DNS (port 53 UDP/TCP).")
    extra_egress: list[FreeForm] = _desc(
        "Extra egress rules (e.g. to an OTLP collector or a proxy)."
    )


class TracingSecretValues(_Values):
    """A key of a Secret in the operator's namespace."""

    name: str = Field(max_length=253, description="Secret name; empty = no headers.")
    key: str = Field(max_length=253, description="Key within the Secret.")


class TracingValues(_Values):
    """OpenTelemetry export of the operator's own spans of each Run (the runner's spans go
    where the Run's Workspace ``spec.tracing`` says: point both at one collector)."""

    endpoint: str = Field(
        max_length=2048,
        pattern=r"^(|https?://[^/\s]+.*)$",
        description="OTLP/HTTP base URL (e.g. http://otel-collector.observability:4318); "
        "empty = the operator exports no spans.",
    )
    headers_secret: TracingSecretValues = _desc(
        "A Secret key holding OTEL_EXPORTER_OTLP_HEADERS (key1=value1,...), e.g. an API key."
    )


class PdbValues(_Values):
    """An optional PodDisruptionBudget (useful with replicaCount > 1)."""

    enabled: bool = _desc("Create the PodDisruptionBudget.")
    min_available: int | str = Field(
        description="minAvailable (number or percent); empty string = not set.",
        json_schema_extra={"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]},
    )
    max_unavailable: int | str = Field(
        description="maxUnavailable (number or percent); empty string = not set.",
        json_schema_extra={"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]},
    )

    @model_validator(mode="after")
    def _one_of(self) -> Self:
        if self.enabled and (self.min_available == "") == (self.max_unavailable == ""):
            raise ValueError(
                "podDisruptionBudget: set exactly one of minAvailable or maxUnavailable"
            )
        return self


class WebViewServiceValues(_Values):
    """The web view's Service."""

    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = _desc("Service type.")
    port: int = Field(ge=1, le=65535, description="Service port.")


class WebViewProxyValues(_Values):
    """The authenticating proxy of a per-user web view: oauth2-proxy, a second container in
    the operator's pod, the view's only way in (the view listens on loopback)."""

    image: ImageValues = _desc("oauth2-proxy image (tag or digest required).")
    args: list[str] = _desc(
        "Its provider flags, e.g. [--provider=oidc, --oidc-issuer-url=..., --email-domain=*]; "
        "the chart sets the listen address, the upstream and --pass-user-headers."
    )
    env_from_secret: str = Field(
        max_length=253,
        description="A Secret with OAUTH2_PROXY_CLIENT_ID, OAUTH2_PROXY_CLIENT_SECRET and "
        "OAUTH2_PROXY_COOKIE_SECRET (envFrom); empty = none.",
    )
    resources: ResourceValues = _desc("The proxy container's resources.")


class WebViewValues(_Values):
    """The read-only web view (skill library, agents, runs) served by the operator."""

    enabled: bool = _desc("Serve the web view and its Service.")
    single_user: bool = _desc(
        "Show whoever reaches the view everything the operator sees (`--web-view-single-user`"
        " on 0.0.0.0:<port>: a single-user install, the demo). Off: per user, behind `proxy`."
    )
    port: int = Field(
        ge=1024,
        le=65535,
        description="The container port the Service reaches: the proxy's (per user) or the "
        "view's (single user).",
    )
    local_port: int = Field(
        ge=1024,
        le=65535,
        description="Per user: the loopback port the operator serves the view on (the "
        "proxy's upstream).",
    )
    proxy: WebViewProxyValues = _desc("The authenticating proxy (per user).")
    service: WebViewServiceValues = _desc("The web view Service (ClusterIP by default).")


class ResourceValues(_Values):
    """Container resources."""

    requests: dict[str, str | int] = _desc("Requests, e.g. {cpu: 100m, memory: 128Mi}.")
    limits: dict[str, str | int] = _desc("Limits, e.g. {memory: 512Mi}.")


class ChartValues(_Values):
    """Values of the swarmkit-operator chart."""

    name_override: str = Field(
        default="", max_length=63, description="Replaces the chart name in resource names."
    )
    full_name_override: str = Field(
        default="",
        max_length=63,
        alias="fullnameOverride",
        description="Replaces the whole release-chart name.",
    )
    replica_count: int = Field(
        default=1,
        ge=1,
        le=5,
        description="Operator replicas. Every replica watches and keeps its caches warm; only "
        "the holder of the leader Lease writes (leaderElection).",
    )
    image: OperatorImageValues = _desc("Operator image.")
    image_pull_secrets: list[FreeForm] = _desc("imagePullSecrets of the operator pod.")
    runtime_image: RuntimeImageValues = _desc(
        "Default runtime image of Run Jobs (written into the operator configuration)."
    )
    crds: CrdValues = _desc("CRDs.")
    watch_namespaces: list[Namespace] = Field(
        description="Namespaces to watch; empty = all namespaces (ClusterRole).",
        json_schema_extra={"uniqueItems": True},
    )
    config: OperatorConfigValues = _desc("The operator configuration file.")
    leader_election: LeaderElectionValues = _desc("Leader election (always on).")
    logging: LoggingValues = _desc("Log output.")
    extra_args: list[str] = _desc("Extra arguments to `python -m swarmkit_operator`.")
    extra_env: list[FreeForm] = _desc("Extra environment variables of the operator container.")
    service_account: ServiceAccountValues = _desc("ServiceAccount.")
    rbac: RbacValues = _desc("RBAC.")
    reviews: ReviewValues = _desc("Human review.")
    pod_annotations: dict[str, str] = _desc("Annotations of the operator pod.")
    pod_labels: dict[str, str] = _desc("Extra labels of the operator pod.")
    pod_security_context: FreeForm = _desc("Pod securityContext (restricted by default).")
    security_context: FreeForm = _desc("Container securityContext (restricted by default).")
    resources: ResourceValues = _desc("Operator container resources.")
    health: HealthValues = _desc("kopf liveness endpoint.")
    liveness_probe: ProbeValues = _desc("livenessProbe timing.")
    readiness_probe: ProbeValues = _desc("readinessProbe timing.")
    metrics: MetricsValues = _desc("Prometheus metrics.")
    web_view: WebViewValues = _desc("Read-only web view.")
    network_policy: NetworkPolicyValues = _desc("NetworkPolicy.")
    tracing: TracingValues = _desc("OpenTelemetry traces of the operator's spans of Runs.")
    pod_disruption_budget: PdbValues = _desc("PodDisruptionBudget.")
    termination_grace_period_seconds: int = Field(
        ge=1, le=3600, description="Seconds the operator gets to finish handlers on shutdown."
    )
    priority_class_name: str = _desc("priorityClassName of the operator pod.")
    node_selector: dict[str, str] = _desc("nodeSelector of the operator pod.")
    tolerations: list[FreeForm] = _desc("Tolerations of the operator pod.")
    affinity: FreeForm = _desc("Affinity of the operator pod.")
    global_: FreeForm = Field(
        default_factory=dict,
        alias="global",
        description="Helm's global values (unused by this chart; allowed for umbrella charts).",
    )

    @field_validator("watch_namespaces")
    @classmethod
    def _unique(cls, namespaces: list[str]) -> list[str]:
        if len(set(namespaces)) != len(namespaces):
            raise ValueError("watchNamespaces must not repeat a namespace")
        return namespaces

    @model_validator(mode="after")
    def _cross_field(self) -> Self:
        if self.metrics.enabled and self.metrics.port == self.health.port:
            raise ValueError("metrics.port and health.port must differ")
        if self.web_view.enabled and self.web_view.port in (
            self.health.port,
            self.metrics.port if self.metrics.enabled else None,
        ):
            raise ValueError("webView.port must differ from health.port and metrics.port")
        if self.web_view.enabled and not self.web_view.single_user:
            if not (self.web_view.proxy.image.tag or self.web_view.proxy.image.digest):
                raise ValueError("webView.proxy.image: set a tag or a digest")
            if self.web_view.local_port in (
                self.web_view.port,
                self.health.port,
                self.metrics.port if self.metrics.enabled else None,
            ):
                raise ValueError("webView.localPort must differ from webView.port, health.port "
                                 "and metrics.port")  # fmt: skip
        return self


def _strip(node: Any) -> Any:
    """Drop pydantic's titles and the per-field `default`s (values.yaml holds the defaults)."""
    if isinstance(node, list):
        return [_strip(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "default"):
            continue
        if key == "properties":
            out[key] = {name: _strip(sub) for name, sub in value.items()}
        else:
            out[key] = _strip(value)
    if "anyOf" in out and "type" in out:
        del out["type"]
    return out


def values_schema() -> dict[str, Any]:
    """The chart's values.schema.json (JSON Schema 2020-12, what Helm 3.18+/4 validates)."""
    raw = ChartValues.model_json_schema(by_alias=True, mode="validation")
    schema = _strip(raw)
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": "GENERATED by `make generate` from hack/swarmkit_codegen/"
        "chart_values.py. Do not edit.",
        **schema,
        "title": "swarmkit-operator chart values",
    }
    return schema


def render() -> dict[Path, str]:
    """Files this module generates, path (relative to the repo root) → content."""
    text = json.dumps(values_schema(), indent=2, sort_keys=False) + "\n"
    return {SCHEMA_PATH: text}


__all__ = ["SCHEMA_PATH", "ChartValues", "render", "values_schema"]
