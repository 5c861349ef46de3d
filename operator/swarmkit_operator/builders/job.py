"""The Job of a Run (pure: a RunBundle, the Workspace and the operator config → a Job dict).

One Run → exactly one ``batch/v1`` Job at a time, named from the Run's name and uid
(``run-<name>-<uid[:5]>``, ``-r<n>`` for the n-th recreation after the Job was lost), so a
quick delete-and-recreate of a Run never collides and an operator restart re-finds the Job
instead of creating a second one.

What the pod gets:

* the runtime image (Workspace ``runtime.image``, else the operator's configured image),
  started as ``run --bundle /etc/swarmkit/bundle``;
* the run's immutable bundle ConfigMap at :data:`~swarmkit_api.bundle.BUNDLE_MOUNT`, its
  flow data files at :data:`FLOW_DATA_MOUNT`, and every pinned skill ConfigMap read-only at
  ``/etc/swarmkit/skills/<skill>/`` with each bundled file at its real path (volume
  ``items``; scripts mode 0555, other files 0444);
* every Secret reference of the Workspace as an env var ``valueFrom.secretKeyRef``
  (:func:`~swarmkit_api.bundle.secret_env_name`); no value is ever copied;
* a restricted security context (non-root, read-only root filesystem with emptyDir
  ``/scratch`` and ``/tmp``, all capabilities dropped, no privilege escalation, seccomp
  RuntimeDefault), no service-account token, no service links;
* ``activeDeadlineSeconds`` = the run timeout plus :data:`DEADLINE_GRACE_SECONDS` (the runner
  enforces the timeout itself and reports ``TimedOut``; the Job deadline is the backstop),
  ``backoffLimit`` (0 by default), ``ttlSecondsAfterFinished``, ``podReplacementPolicy:
  Failed`` (never two runner pods at once) and a pod failure policy (an invalid bundle,
  exit code 2, fails at once; a disrupted pod is retried without counting);
* the finalizer :data:`POD_FINALIZER` on the pod, so the pod (and its termination message)
  outlives a Job deleted by its TTL or by a person until the operator has recorded the
  outcome; the operator removes it right after.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swarmkit_api.bundle import (
    BUNDLE_FILE,
    BUNDLE_MOUNT,
    SCRATCH_MOUNT,
    SKILLS_MOUNT,
    TERMINATION_LOG,
    RunBundle,
    secret_env_name,
)
from swarmkit_api.common import SecretKeyRef
from swarmkit_api.workspace import RuntimeDefaults, WorkspaceSpec

from ..config import OperatorConfig
from ..hashing import sha256_hex
from . import RUN_LABEL

API_GROUP = "swarmkit.dev"
RUN_API_VERSION = "swarmkit.dev/v1alpha1"

#: Labels every Run child carries (RUN_LABEL is shared with the reconcile loop's GC).
RUN_UID_LABEL = "swarmkit.dev/run-uid"
TOPOLOGY_LABEL = "swarmkit.dev/topology"
TOPOLOGY_VERSION_LABEL = "swarmkit.dev/topology-version"
AGENT_LABEL = "swarmkit.dev/agent"
#: ``agents.swarmkit.dev/<agent>: <version>`` for every agent the run pins.
AGENT_VERSION_LABEL_PREFIX = "agents.swarmkit.dev/"
RECREATION_LABEL = "swarmkit.dev/job-recreation"
MANAGED_BY_LABELS = {
    "app.kubernetes.io/name": "swarmkit-runner",
    "app.kubernetes.io/component": "run",
    "app.kubernetes.io/managed-by": "swarmkit-operator",
}
RUN_NAME_ANNOTATION = "swarmkit.dev/run-name"
CORRELATION_ANNOTATION = "swarmkit.dev/correlation-id"
BUNDLE_ANNOTATION = "swarmkit.dev/bundle-config-map"

#: Keeps the pod (and its termination message) until the operator recorded the outcome.
POD_FINALIZER = "swarmkit.dev/run-outcome"
CONTAINER_NAME = "runner"
#: Exit code of the runner for an invalid bundle / configuration (ValidationFailed).
EXIT_VALIDATION_FAILED = 2
#: Seconds the Job deadline trails the run timeout the runner enforces itself.
DEADLINE_GRACE_SECONDS = 10
#: Where the run's flow data files (copied into the bundle ConfigMap) are mounted.
FLOW_DATA_MOUNT = "/etc/swarmkit/flow-data"
TMP_MOUNT = "/tmp"
#: uid/gid of the runner (the runtime image's non-root user).
RUNNER_UID = 65532
DEFAULT_RESOURCES: dict[str, dict[str, str]] = {
    "requests": {"cpu": "100m", "memory": "128Mi"},
    "limits": {"memory": "1Gi"},
}
MAX_NAME = 63

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
#: Label prefixes users may not set through Run.spec.labels (they would spoof our links).
_RESERVED_LABEL_DOMAINS = ("swarmkit.dev", "kubernetes.io", "k8s.io")


def _dns_label(text: str) -> str:
    """``text`` reduced to DNS-label characters (dots and others become dashes)."""
    out = re.sub(r"[^a-z0-9-]+", "-", text.lower())
    return re.sub(r"-{2,}", "-", out).strip("-")


def job_name(run_name: str, run_uid: str, recreation: int = 0) -> str:
    """``run-<name>-<uid[:5]>`` (``-r<n>`` when recreated), at most 63 characters.

    The name is shortened (never the uid part) so that the result is a valid DNS label:
    the Job controller puts it in the ``job-name`` label of the pod.
    """
    uid5 = _dns_label(run_uid)[:5] or "00000"
    suffix = f"-{uid5}" + (f"-r{recreation}" if recreation else "")
    room = MAX_NAME - len("run-") - len(suffix)
    body = _dns_label(run_name)[:room].rstrip("-") or "x"
    return f"run-{body}{suffix}"


def bundle_config_map_name(run_name: str, run_uid: str) -> str:
    """``run-<name>-<uid5>-bundle``: the run's immutable bundle ConfigMap."""
    return f"{job_name(run_name, run_uid)}-bundle"


def label_value(text: str) -> str:
    """``text`` as a valid label value: kept when it is one, else shortened with a hash."""
    if len(text) <= MAX_NAME and _LABEL_VALUE.match(text):
        return text
    digest = sha256_hex(text)[:10]
    body = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[: MAX_NAME - 11].strip("-_.")
    return f"{body}-{digest}" if body else digest


def is_valid_label(key: str, value: str) -> bool:
    """Whether ``key: value`` is a syntactically valid Kubernetes label."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    if not name or len(name) > MAX_NAME or not _LABEL_NAME.match(name):
        return False
    return len(value) <= MAX_NAME and bool(_LABEL_VALUE.match(value))


def user_labels(labels: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Run.spec.labels safe to copy to the Job and pod, and the keys refused (with why)."""
    kept: dict[str, str] = {}
    refused: list[str] = []
    for key, value in sorted(labels.items()):
        prefix = key.rpartition("/")[0]
        if any(prefix == d or prefix.endswith("." + d) for d in _RESERVED_LABEL_DOMAINS):
            refused.append(f"{key} (reserved prefix)")
        elif not is_valid_label(key, value):
            refused.append(f"{key} (not a valid label)")
        else:
            kept[key] = value
    return kept, refused


@dataclass(frozen=True)
class SkillFileItem:
    """One file of a rendered skill ConfigMap: its (escaped) key and its real path."""

    key: str
    path: str
    is_script: bool = False
    sha256: str = ""


@dataclass(frozen=True)
class SkillMount:
    """A pinned skill ConfigMap and the files it projects into the skill's directory."""

    skill: str
    config_map: str
    items: tuple[SkillFileItem, ...] = ()

    @property
    def directory(self) -> str:
        return skill_directory(self.skill)


def skill_directory(skill: str) -> str:
    """Where skill ``skill``'s files are mounted in the runner's pod."""
    return f"{SKILLS_MOUNT}/{skill}"


@dataclass(frozen=True)
class RunRef:
    """The identity of the Run that owns the Job."""

    name: str
    namespace: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=dict)
    correlation_id: str | None = None


def owner_reference(run: RunRef) -> dict[str, Any]:
    """The ownerReference of every Run child (Job and bundle ConfigMap)."""
    return {
        "apiVersion": RUN_API_VERSION,
        "kind": "Run",
        "name": run.name,
        "uid": run.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def run_labels(run: RunRef, bundle: RunBundle | None = None) -> dict[str, str]:
    """Labels linking a child to its Run, Topology and agent versions."""
    labels = dict(MANAGED_BY_LABELS)
    labels[RUN_LABEL] = label_value(run.name)
    labels[RUN_UID_LABEL] = label_value(run.uid)
    if bundle is not None:
        if bundle.target_kind == "Topology":
            labels[TOPOLOGY_LABEL] = label_value(bundle.target)
            topo = bundle.topologies.get(bundle.target)
            if topo is not None:
                labels[TOPOLOGY_VERSION_LABEL] = label_value(topo.version)
        else:
            labels[AGENT_LABEL] = label_value(bundle.target)
        for name, agent in sorted(bundle.agents.items()):
            key = AGENT_VERSION_LABEL_PREFIX + name
            value = label_value(agent.version)
            if is_valid_label(key, value):
                labels[key] = value
    return labels


def workspace_secret_refs(workspace: WorkspaceSpec) -> list[SecretKeyRef]:
    """Every Secret reference of the Workspace, each once, in a stable order."""
    refs: list[SecretKeyRef] = []
    for provider in workspace.model_providers:
        if provider.api_key is not None:
            refs.append(provider.api_key)
    for server in workspace.mcp_servers:
        refs.extend(env.secret_key_ref for env in server.env if env.secret_key_ref is not None)
        refs.extend(header.secret_key_ref for header in server.headers)
    for tool in workspace.tools:
        if tool.credentials is not None:
            refs.append(tool.credentials.secret_key_ref)
    refs.extend(cred.secret_key_ref for cred in workspace.credentials)
    if workspace.search_provider is not None and workspace.search_provider.api_key is not None:
        refs.append(workspace.search_provider.api_key)
    seen: dict[str, SecretKeyRef] = {}
    for ref in refs:
        seen.setdefault(secret_env_name(ref), ref)
    return [seen[k] for k in sorted(seen)]


def secret_env(workspace: WorkspaceSpec) -> list[dict[str, Any]]:
    """Env entries that inject every Secret reference (by reference, never by value)."""
    return [
        {
            "name": secret_env_name(ref),
            "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
        }
        for ref in workspace_secret_refs(workspace)
    ]


def _resources(runtime: RuntimeDefaults) -> dict[str, dict[str, str]]:
    if runtime.resources is None:
        return {k: dict(v) for k, v in DEFAULT_RESOURCES.items()}
    out: dict[str, dict[str, str]] = {}
    if runtime.resources.requests:
        out["requests"] = dict(runtime.resources.requests)
    if runtime.resources.limits:
        out["limits"] = dict(runtime.resources.limits)
    return out


def _skill_volume(index: int, mount: SkillMount) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in mount.items:
        if item.path in seen:
            continue
        seen.add(item.path)
        items.append(
            {"key": item.key, "path": item.path, "mode": 0o555 if item.is_script else 0o444}
        )
    volume: dict[str, Any] = {"name": f"skill-{index}", "configMap": {"name": mount.config_map}}
    volume["configMap"]["defaultMode"] = 0o444
    if items:
        volume["configMap"]["items"] = items
    return volume


def runtime_defaults(workspace: WorkspaceSpec) -> RuntimeDefaults:
    return workspace.runtime or RuntimeDefaults()


def active_deadline_seconds(timeout_seconds: int) -> int:
    return timeout_seconds + DEADLINE_GRACE_SECONDS


def build_job(
    *,
    run: RunRef,
    bundle: RunBundle,
    skill_mounts: Sequence[SkillMount],
    config: OperatorConfig,
    bundle_config_map: str,
    flow_data_keys: Mapping[str, str] | None = None,
    recreation: int = 0,
) -> dict[str, Any]:
    """The Run's Job. ``flow_data_keys`` maps bundle ConfigMap keys → flow data paths."""
    workspace = bundle.workspace
    runtime = runtime_defaults(workspace)
    name = job_name(run.name, run.uid, recreation)
    extra_labels, _refused = user_labels(run.labels)
    labels = {**extra_labels, **run_labels(run, bundle)}
    if recreation:
        labels[RECREATION_LABEL] = str(recreation)
    annotations = {
        RUN_NAME_ANNOTATION: run.name,
        BUNDLE_ANNOTATION: bundle_config_map,
        CORRELATION_ANNOTATION: bundle.run.correlation_id,
    }

    volumes: list[dict[str, Any]] = [
        {
            "name": "bundle",
            "configMap": {
                "name": bundle_config_map,
                "defaultMode": 0o444,
                "items": [{"key": BUNDLE_FILE, "path": BUNDLE_FILE}],
            },
        },
        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "bundle", "mountPath": BUNDLE_MOUNT, "readOnly": True},
        {"name": "scratch", "mountPath": SCRATCH_MOUNT},
        {"name": "tmp", "mountPath": TMP_MOUNT},
    ]
    if flow_data_keys:
        volumes.append(
            {
                "name": "flow-data",
                "configMap": {
                    "name": bundle_config_map,
                    "defaultMode": 0o444,
                    "items": [
                        {"key": key, "path": path} for key, path in sorted(flow_data_keys.items())
                    ],
                },
            }
        )
        mounts.append({"name": "flow-data", "mountPath": FLOW_DATA_MOUNT, "readOnly": True})
    for i, mount in enumerate(sorted(skill_mounts, key=lambda m: m.skill)):
        volumes.append(_skill_volume(i, mount))
        mounts.append({"name": f"skill-{i}", "mountPath": mount.directory, "readOnly": True})

    env: list[dict[str, Any]] = [
        {"name": "HOME", "value": SCRATCH_MOUNT},
        {"name": "TMPDIR", "value": TMP_MOUNT},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        *secret_env(workspace),
    ]
    security = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": RUNNER_UID,
        "runAsGroup": RUNNER_UID,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": workspace_image(workspace, config),
        "imagePullPolicy": runtime.image_pull_policy,
        "args": ["run", "--bundle", BUNDLE_MOUNT],
        "workingDir": SCRATCH_MOUNT,
        "env": env,
        "volumeMounts": mounts,
        "resources": _resources(runtime),
        "securityContext": security,
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 15,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUNNER_UID,
            "runAsGroup": RUNNER_UID,
            "fsGroup": RUNNER_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": volumes,
    }
    if runtime.service_account_name:
        pod_spec["serviceAccountName"] = runtime.service_account_name
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": run.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(run)],
        },
        "spec": {
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": runtime.backoff_limit,
            "activeDeadlineSeconds": active_deadline_seconds(bundle.run.timeout_seconds),
            "ttlSecondsAfterFinished": runtime.job_ttl_seconds_after_finished,
            "podReplacementPolicy": "Failed",
            "podFailurePolicy": {
                "rules": [
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                    {
                        "action": "FailJob",
                        "onExitCodes": {
                            "containerName": CONTAINER_NAME,
                            "operator": "In",
                            "values": [EXIT_VALIDATION_FAILED],
                        },
                    },
                ]
            },
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": annotations,
                    "finalizers": [POD_FINALIZER],
                },
                "spec": pod_spec,
            },
        },
    }


def workspace_image(workspace: WorkspaceSpec, config: OperatorConfig) -> str:
    """The runtime image: the Workspace's, else the operator's configured default."""
    runtime = runtime_defaults(workspace)
    return runtime.image or config.runtime_image


__all__ = [
    "BUNDLE_ANNOTATION",
    "CONTAINER_NAME",
    "FLOW_DATA_MOUNT",
    "POD_FINALIZER",
    "RUN_LABEL",
    "RUN_UID_LABEL",
    "RunRef",
    "SkillFileItem",
    "SkillMount",
    "build_job",
    "bundle_config_map_name",
    "job_name",
    "label_value",
    "owner_reference",
    "run_labels",
    "secret_env",
    "skill_directory",
    "user_labels",
    "workspace_secret_refs",
]
