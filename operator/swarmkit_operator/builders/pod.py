"""The runner's pod (pure: Workspace, operator config, pinned ConfigMaps → a pod spec).

One pinned-workload mechanism, several users: a Run's Job (:mod:`.job`), a served
Topology's Deployment (:mod:`.serve`) and an Agent gateway's Deployment all run the
runtime image over the same immutable, content-addressed ConfigMaps, and all get the pod
built here:

* the runtime image (Workspace ``runtime.image``, else the operator's configured image)
  with the caller's ``args`` (``run --bundle …``, ``serve --bundle …``);
* the bundle ConfigMap at :data:`~swarmkit_api.bundle.BUNDLE_MOUNT` (only its
  ``bundle.json`` key), its flow data files at :data:`FLOW_DATA_MOUNT`, and every pinned
  skill ConfigMap read-only at ``/etc/swarmkit/skills/<skill>/`` with each bundled file at
  its real path (volume ``items``; scripts mode 0555, other files 0444);
* every Secret reference of the Workspace (plus the caller's extra ones) as an env var
  ``valueFrom.secretKeyRef`` (:func:`~swarmkit_api.bundle.secret_env_name`); no value is
  ever copied;
* the locked-down security context (non-root uid :data:`RUNNER_UID`, read-only root
  filesystem with emptyDir ``/scratch`` and ``/tmp``, all capabilities dropped, no
  privilege escalation, seccomp RuntimeDefault), no service-account token (except the MCP
  gateway's, which opens Reviews), no service links;
* resources from the Workspace (or the caller's override), else :data:`DEFAULT_RESOURCES`.

Long-running users add ``ports`` and probes; the Job adds its restart policy and finalizer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from swarmkit_api.bundle import (
    BUNDLE_FILE,
    BUNDLE_MOUNT,
    BUNDLE_SHA256_ENV,
    SCRATCH_MOUNT,
    SKILLS_MOUNT,
    TERMINATION_LOG,
    RunBundle,
    secret_env_name,
)
from swarmkit_api.common import ResourceRequirements, SecretKeyRef
from swarmkit_api.workspace import RuntimeDefaults, WorkspaceSpec

from ..config import OperatorConfig
from .skill import skill_projection

CONTAINER_NAME = "runner"
#: Where the flow data files (copied into the bundle ConfigMap) are mounted.
FLOW_DATA_MOUNT = "/etc/swarmkit/flow-data"
TMP_MOUNT = "/tmp"
#: uid/gid of the runner (the runtime image's non-root user).
RUNNER_UID = 65532
DEFAULT_RESOURCES: dict[str, dict[str, str]] = {
    "requests": {"cpu": "100m", "memory": "128Mi"},
    "limits": {"memory": "1Gi"},
}


@dataclass(frozen=True)
class SkillFileItem:
    """One file of a rendered skill ConfigMap: its (escaped) key and its real path."""

    key: str
    path: str
    is_script: bool = False
    sha256: str = ""
    #: The part ConfigMap holding it (a large skill); "" = the mount's own ConfigMap.
    config_map: str = ""


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


def runtime_defaults(workspace: WorkspaceSpec) -> RuntimeDefaults:
    return workspace.runtime or RuntimeDefaults()


def runtime_class(bundle: RunBundle) -> str | None:
    """The RuntimeClass of the bundle's pods: its root agent's, else the Workspace's."""
    name = bundle.target
    if bundle.target_kind == "Topology":
        topology = bundle.topologies.get(bundle.target)
        name = topology.spec.root.agent_ref.name if topology is not None else ""
    root = bundle.agents.get(name)
    if root is not None and root.spec.runtime_class_name:
        return root.spec.runtime_class_name
    return runtime_defaults(bundle.workspace).runtime_class_name


def workspace_image(workspace: WorkspaceSpec, config: OperatorConfig) -> str:
    """The runtime image: the Workspace's, else the operator's configured default."""
    runtime = runtime_defaults(workspace)
    return runtime.image or config.runtime_image


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
    return unique_refs(refs)


def unique_refs(refs: Sequence[SecretKeyRef]) -> list[SecretKeyRef]:
    """``refs`` each once (by env var name), sorted by env var name."""
    seen: dict[str, SecretKeyRef] = {}
    for ref in refs:
        seen.setdefault(secret_env_name(ref), ref)
    return [seen[k] for k in sorted(seen)]


def secret_env_entries(refs: Sequence[SecretKeyRef]) -> list[dict[str, Any]]:
    """Env entries that inject each Secret reference (by reference, never by value)."""
    return [
        {
            "name": secret_env_name(ref),
            "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
        }
        for ref in unique_refs(refs)
    ]


def secret_env(workspace: WorkspaceSpec) -> list[dict[str, Any]]:
    """Env entries that inject every Secret reference of the Workspace."""
    return secret_env_entries(workspace_secret_refs(workspace))


def resources(
    runtime: RuntimeDefaults, override: ResourceRequirements | None = None
) -> dict[str, dict[str, str]]:
    """Container resources: ``override``, else the Workspace's, else the defaults."""
    chosen = override if override is not None else runtime.resources
    if chosen is None:
        return {k: dict(v) for k, v in DEFAULT_RESOURCES.items()}
    out: dict[str, dict[str, str]] = {}
    if chosen.requests:
        out["requests"] = dict(chosen.requests)
    if chosen.limits:
        out["limits"] = dict(chosen.limits)
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
    parts = {i.key: i.config_map for i in mount.items if i.config_map}
    if parts:  # a large skill: its revision's ConfigMaps, projected into one directory
        volume["projected"] = skill_projection(mount.config_map, items, parts)
        del volume["configMap"]
    return volume


def container_security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": RUNNER_UID,
        "runAsGroup": RUNNER_UID,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUNNER_UID,
        "runAsGroup": RUNNER_UID,
        "fsGroup": RUNNER_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


#: The environment of every runner container, before the caller's and the Secrets'.
RUNNER_ENV: tuple[Mapping[str, str], ...] = (
    {"name": "HOME", "value": SCRATCH_MOUNT},
    {"name": "TMPDIR", "value": TMP_MOUNT},
    {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
    {"name": "PYTHONUNBUFFERED", "value": "1"},
)


def runner_pod_spec(
    *,
    workspace: WorkspaceSpec,
    config: OperatorConfig,
    args: Sequence[str],
    bundle_config_map: str,
    skill_mounts: Sequence[SkillMount] = (),
    flow_data_keys: Mapping[str, str] | None = None,
    restart_policy: str = "Never",
    resource_override: ResourceRequirements | None = None,
    extra_secret_env: Sequence[SecretKeyRef] = (),
    extra_env: Sequence[Mapping[str, Any]] = (),
    ports: Sequence[Mapping[str, Any]] = (),
    probes: Mapping[str, Any] | None = None,
    termination_grace_seconds: int = 15,
    service_account_name: str | None = None,
    api_access: bool = False,
    runtime_class_name: str | None = None,
    bundle_sha256: str | None = None,
) -> dict[str, Any]:
    """The runner's pod spec. ``flow_data_keys`` maps bundle ConfigMap keys → flow data paths;
    ``probes`` holds ``readinessProbe``/``livenessProbe``/``startupProbe`` entries.
    ``api_access`` mounts the service account's token (only the MCP gateway, which opens
    Reviews; its ``service_account_name`` replaces the Workspace's). ``bundle_sha256``: of
    the bundle.json written (:data:`~swarmkit_api.bundle.BUNDLE_SHA256_ENV`): the runner
    refuses any other mounted file, in a Job and in a served pod alike."""
    runtime = runtime_defaults(workspace)
    volumes, mounts = _volumes(bundle_config_map, flow_data_keys, skill_mounts)
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": workspace_image(workspace, config),
        "imagePullPolicy": runtime.image_pull_policy,
        "args": list(args),
        "workingDir": SCRATCH_MOUNT,
        "env": runner_env(workspace, extra_env, extra_secret_env, bundle_sha256),
        "volumeMounts": mounts,
        "resources": resources(runtime, resource_override),
        "securityContext": container_security_context(),
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if ports:
        container["ports"] = [dict(p) for p in ports]
    for key, probe in (probes or {}).items():
        container[key] = probe
    pod_spec: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "automountServiceAccountToken": api_access,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": termination_grace_seconds,
        "securityContext": pod_security_context(),
        "containers": [container],
        "volumes": volumes,
    }
    account = service_account_name or runtime.service_account_name
    if account:
        pod_spec["serviceAccountName"] = account
    if runtime_class_name:
        pod_spec["runtimeClassName"] = runtime_class_name
    return pod_spec


def runner_env(
    workspace: WorkspaceSpec,
    extra_env: Sequence[Mapping[str, Any]] = (),
    extra_secret_env: Sequence[SecretKeyRef] = (),
    bundle_sha256: str | None = None,
) -> list[dict[str, Any]]:
    """The runner container's environment: :data:`RUNNER_ENV`, the caller's ``extra_env``,
    the bundle's digest, then every Secret reference (the Workspace's and
    ``extra_secret_env``) by reference."""
    secret_refs = workspace_secret_refs(workspace)
    if extra_secret_env:
        secret_refs = unique_refs([*secret_refs, *extra_secret_env])
    digest = [{"name": BUNDLE_SHA256_ENV, "value": bundle_sha256}] if bundle_sha256 else []
    return [
        *(dict(e) for e in RUNNER_ENV),
        *(dict(e) for e in extra_env),
        *digest,
        *secret_env_entries(secret_refs),
    ]


#: The pod volume of the bundle ConfigMap (bundle.json).
BUNDLE_VOLUME = "bundle"


def bundle_source(pod_spec: Mapping[str, Any]) -> tuple[str, str]:
    """What a runner pod spec (:func:`runner_pod_spec`) runs: the bundle ConfigMap its
    bundle volume mounts and the sha256 of bundle.json its container carries
    (:data:`~swarmkit_api.bundle.BUNDLE_SHA256_ENV`, which the runner checks); "" for
    either one it lacks."""
    volumes = pod_spec.get("volumes") or ()
    volume: Mapping[str, Any] = next((v for v in volumes if v.get("name") == BUNDLE_VOLUME), {})
    config_map = str((volume.get("configMap") or {}).get("name") or "")
    env = (e for c in pod_spec.get("containers") or () for e in c.get("env") or ())
    digest = next(
        (str(e.get("value") or "") for e in env if e.get("name") == BUNDLE_SHA256_ENV), ""
    )
    return config_map, digest


def _volumes(
    bundle_config_map: str,
    flow_data_keys: Mapping[str, str] | None,
    skill_mounts: Sequence[SkillMount],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pod's volumes and the container's mounts: the bundle, scratch and tmp, the
    flow data files (from the bundle ConfigMap), each pinned skill ConfigMap."""
    volumes: list[dict[str, Any]] = [
        {
            "name": BUNDLE_VOLUME,
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
        {"name": BUNDLE_VOLUME, "mountPath": BUNDLE_MOUNT, "readOnly": True},
        {"name": "scratch", "mountPath": SCRATCH_MOUNT},
        {"name": "tmp", "mountPath": TMP_MOUNT},
    ]
    if flow_data_keys:
        items = [{"key": key, "path": path} for key, path in sorted(flow_data_keys.items())]
        volumes.append(
            {
                "name": "flow-data",
                "configMap": {"name": bundle_config_map, "defaultMode": 0o444, "items": items},
            }
        )
        mounts.append({"name": "flow-data", "mountPath": FLOW_DATA_MOUNT, "readOnly": True})
    for i, mount in enumerate(sorted(skill_mounts, key=lambda m: m.skill)):
        volumes.append(_skill_volume(i, mount))
        mounts.append({"name": f"skill-{i}", "mountPath": mount.directory, "readOnly": True})
    return volumes, mounts


def pod_template(
    spec: Mapping[str, Any],
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
    finalizers: Sequence[str] = (),
) -> dict[str, Any]:
    """A ``PodTemplateSpec`` around ``spec`` (what a Job or a Deployment wraps)."""
    metadata: dict[str, Any] = {"labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    return {"metadata": metadata, "spec": dict(spec)}


__all__ = [
    "BUNDLE_VOLUME",
    "CONTAINER_NAME",
    "DEFAULT_RESOURCES",
    "FLOW_DATA_MOUNT",
    "RUNNER_ENV",
    "RUNNER_UID",
    "TMP_MOUNT",
    "SkillFileItem",
    "SkillMount",
    "bundle_source",
    "pod_template",
    "resources",
    "runner_env",
    "runner_pod_spec",
    "runtime_defaults",
    "secret_env",
    "secret_env_entries",
    "skill_directory",
    "workspace_image",
    "workspace_secret_refs",
]
