"""Workspace → ``ws-<name>-<hash8>``, with every Secret referenced and none copied.

Key scheme of the rendered ConfigMap:

``workspace.yaml``
    The normalized spec (defaults filled in). Credentials appear only as Secret references.
``secrets.json``
    Every Secret reference as ``{"path": "spec.modelProviders[0].apiKey", "name": ...,
    "key": ...}``, sorted by path: what a Run's pod gets as ``secretKeyRef`` env vars.
``flow.json`` and ``flow.<i>``
    Every ``flowData`` file (inline or from a ConfigMap key), so runs pin its content:
    ``flow.json`` lists ``{"key": "flow.<i>", "path": ..., "sha256": ..., "size": ...}``.

``status.version`` is sha256[:12] over the rendered data; the ConfigMap name uses its first
eight hex digits. Secrets are not read (the operator holds no verb on them, issue 41): a
missing Secret or key is reported by the pod that needs it, from the kubelet's
``CreateContainerConfigError``, in the Run's ``Succeeded`` (or a served workload's
``Serving``) condition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from swarmkit_api import ManifestError, SecretKeyRef, validate_spec
from swarmkit_api.conditions import (
    ACCEPTED,
    READY,
    REASON_CONFIG_MAP_NOT_FOUND,
    REASON_DUPLICATE_NAME,
    REASON_TOO_LARGE,
    REASON_VALID,
)
from swarmkit_api.workspace import WorkspaceSpec

from ..hashing import sha256_hex
from . import (
    MAX_CONFIGMAP_BYTES,
    ObjectRef,
    Verdict,
    config_map_size,
    content_digest,
    dump_json,
    dump_yaml,
    invalid_verdict,
    rendered_config_map,
    rendered_verdict,
)
from .skill import SourceConfigMap

WORKSPACE_YAML = "workspace.yaml"
SECRETS_JSON = "secrets.json"
FLOW_JSON = "flow.json"
FLOW_KEY_PREFIX = "flow."


@dataclass(frozen=True)
class SecretUse:
    """Where the spec references a Secret key."""

    path: str
    ref: SecretKeyRef


def secret_uses(spec: WorkspaceSpec) -> list[SecretUse]:
    """Every Secret key reference of the spec, with its field path, in spec order."""
    uses: list[SecretUse] = []
    for i, server in enumerate(spec.mcp_servers):
        for j, env in enumerate(server.env):
            if env.secret_key_ref is not None:
                uses.append(
                    SecretUse(f"spec.mcpServers[{i}].env[{j}].secretKeyRef", env.secret_key_ref)
                )
        for j, header in enumerate(server.headers):
            uses.append(
                SecretUse(f"spec.mcpServers[{i}].headers[{j}].secretKeyRef", header.secret_key_ref)
            )
    for i, tool in enumerate(spec.tools):
        if tool.credentials is not None:
            uses.append(
                SecretUse(
                    f"spec.tools[{i}].credentials.secretKeyRef", tool.credentials.secret_key_ref
                )
            )
    for i, cred in enumerate(spec.credentials):
        uses.append(SecretUse(f"spec.credentials[{i}].secretKeyRef", cred.secret_key_ref))
    for i, provider in enumerate(spec.model_providers):
        if provider.api_key is not None:
            uses.append(SecretUse(f"spec.modelProviders[{i}].apiKey", provider.api_key))
    if spec.search_provider is not None and spec.search_provider.api_key is not None:
        uses.append(SecretUse("spec.searchProvider.apiKey", spec.search_provider.api_key))
    return uses


def referenced_config_maps(raw_spec: Mapping[str, Any]) -> set[str]:
    """ConfigMaps the (possibly invalid) spec takes flow data from."""
    names: set[str] = set()
    for item in raw_spec.get("flowData") or ():
        if isinstance(item, Mapping):
            ref = item.get("configMapRef")
            if isinstance(ref, Mapping) and isinstance(ref.get("name"), str):
                names.add(ref["name"])
    return names


def _duplicates(kind: str, path: str, names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    problems = []
    for name in names:
        if name in seen:
            problems.append(f"{path}: duplicate {kind} name {name!r}")
        seen.add(name)
    return problems


def semantic_problems(spec: WorkspaceSpec) -> list[str]:
    """What the schema cannot express: unique names across the lists."""
    problems = _duplicates(
        "permission bundle", "spec.permissionBundles", (b.name for b in spec.permission_bundles)
    )
    problems += _duplicates("credential", "spec.credentials", (c.name for c in spec.credentials))
    problems += _duplicates(
        "model provider", "spec.modelProviders", (p.name for p in spec.model_providers)
    )
    problems += _duplicates("command pack", "spec.commandPacks", (p.id for p in spec.command_packs))
    problems += _duplicates("flow data", "spec.flowData", (f.path for f in spec.flow_data))
    prefixes = [s.tool_prefix for s in spec.mcp_servers]
    problems += _duplicates("MCP tool prefix", "spec.mcpServers", prefixes)
    return problems


@dataclass(frozen=True)
class WorkspaceRender:
    verdicts: tuple[Verdict, ...]
    spec: WorkspaceSpec | None = None
    version: str | None = None
    config_map: dict[str, Any] | None = None
    problems: tuple[str, ...] = ()

    @property
    def config_map_name(self) -> str | None:
        return str(self.config_map["metadata"]["name"]) if self.config_map else None

    def status_fields(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "renderedConfigMap": self.config_map_name,
            "problems": list(self.problems),
        }


def render_workspace(
    owner: ObjectRef,
    raw_spec: Mapping[str, Any],
    config_maps: Mapping[str, SourceConfigMap | None],
) -> WorkspaceRender:
    """Validate and render the ConfigMap (``config_maps``: the flow-data sources)."""
    try:
        model = validate_spec("Workspace", dict(raw_spec))
    except ManifestError as exc:
        verdict = invalid_verdict(exc)
        return WorkspaceRender(
            verdicts=(verdict, Verdict(READY, "False", verdict.reason, verdict.message)),
            problems=tuple(str(e) for e in exc.errors),
        )
    assert isinstance(model, WorkspaceSpec)
    semantic = semantic_problems(model)
    if semantic:
        return _refused(REASON_DUPLICATE_NAME, tuple(semantic))
    flow = _flow_data(model, config_maps)
    data = _rendered_data(model, flow)
    size = config_map_size(data)
    if size > MAX_CONFIGMAP_BYTES:
        message = (
            f"the rendered workspace is {size} bytes, over the {MAX_CONFIGMAP_BYTES}-byte limit"
        )
        return _refused(REASON_TOO_LARGE, (message,), model)

    digest = content_digest(data)
    manifest = rendered_config_map(owner, digest, data)
    accepted = Verdict(ACCEPTED, "True", REASON_VALID, "the spec is valid")
    if flow.missing:
        ready = Verdict(READY, "False", REASON_CONFIG_MAP_NOT_FOUND, "; ".join(flow.missing))
    else:
        ready = rendered_verdict(manifest)
    return WorkspaceRender(
        verdicts=(accepted, ready),
        spec=model,
        version=digest[:12],
        config_map=manifest,
        problems=flow.missing,
    )


def _refused(
    reason: str, problems: tuple[str, ...], spec: WorkspaceSpec | None = None
) -> WorkspaceRender:
    """Not accepted for ``reason``: nothing rendered, Ready mirrors it, each problem listed."""
    message = "; ".join(problems)
    return WorkspaceRender(
        verdicts=(
            Verdict(ACCEPTED, "False", reason, message),
            Verdict(READY, "False", reason, message),
        ),
        spec=spec,
        problems=problems,
    )


@dataclass(frozen=True)
class _FlowData:
    """The ``flowData`` files gathered: their keys' text, ``flow.json``'s entries, and
    which ConfigMaps or keys are missing (naming each file's field)."""

    data: Mapping[str, str]
    entries: tuple[Mapping[str, Any], ...]
    missing: tuple[str, ...]


def _flow_data(
    model: WorkspaceSpec, config_maps: Mapping[str, SourceConfigMap | None]
) -> _FlowData:
    """Every ``flowData`` file's text (inline or from a ConfigMap key) as ``flow.<i>``."""
    missing: list[str] = []
    entries: list[Mapping[str, Any]] = []
    data: dict[str, str] = {}
    for i, item in enumerate(model.flow_data):
        key = f"{FLOW_KEY_PREFIX}{i}"
        if item.content is not None:
            text = item.content
        else:
            ref = item.config_map_ref
            assert ref is not None
            source = config_maps.get(ref.name)
            where = f"spec.flowData[{i}].configMapRef"
            if source is None:
                missing.append(f"{where}: ConfigMap {ref.name!r} not found")
                continue
            if ref.key not in source.data:
                missing.append(f"{where}: ConfigMap {ref.name!r} has no key {ref.key!r}")
                continue
            text = source.data[ref.key]
        raw = text.encode()
        data[key] = text
        entries.append({"key": key, "path": item.path, "sha256": sha256_hex(raw), "size": len(raw)})
    return _FlowData(data, tuple(entries), tuple(missing))


def _rendered_data(model: WorkspaceSpec, flow: _FlowData) -> dict[str, str]:
    """The rendered ConfigMap's keys (see the module docstring for the scheme)."""
    data = dict(flow.data)
    data[WORKSPACE_YAML] = dump_yaml(model.wire())
    data[SECRETS_JSON] = dump_json(
        sorted(
            ({"path": u.path, "name": u.ref.name, "key": u.ref.key} for u in secret_uses(model)),
            key=lambda e: e["path"],
        )
    )
    data[FLOW_JSON] = dump_json([dict(e) for e in flow.entries])
    return data
