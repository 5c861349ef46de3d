"""Cross-check what the readers collected and assemble the final manifests.

Every manifest is validated with ``swarmkit_api.validate_manifest`` (the models the CRDs
are generated from, CEL twins included), so what ``import`` writes is what admission
accepts. References across files are checked as the sources' own runtimes would: an
unknown permission bundle or topology-node agent is an error, an unknown skill grant,
MCP server or tool a warning (the grant stays inert until it exists).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from swarmkit_api import API_VERSION, ManifestError, validate_manifest
from swarmkit_api.workspace import PLATFORM_BUILTINS

from .collected import Collected, Piece, source_annotation
from .common_map import PROVIDER_KEYS, ensure_provider

SYNC_WAVE = "argocd.argoproj.io/sync-wave"
WAVES = {"ConfigMap": "0", "Workspace": "0", "Skill": "1", "Agent": "2", "Topology": "3"}


@dataclass
class Output:
    """The manifests to write (in apply order) and the Secret template kept apart."""

    manifests: list[dict[str, Any]] = field(default_factory=list)
    secret_template: dict[str, Any] | None = None


def assemble(col: Collected, namespace: str | None) -> Output:
    report = col.report
    _resolve_node_agents(col)
    for label, pieces in (
        ("Skill", col.skills),
        ("Agent", col.agents),
        ("Topology", col.topologies),
        ("MCP server", col.mcp_servers),
        ("tool", col.tools),
        ("permission bundle", col.permission_bundles),
        ("credential", col.credentials),
    ):
        _unique(col, label, pieces)
    if col.agents and not col.model_providers:
        first = col.agents[0].src
        ensure_provider(col, "anthropic", first)
        report.warn(
            first.file,
            first.line,
            first.field("model"),
            "no model provider in the sources: added provider 'anthropic' (API key "
            f"{PROVIDER_KEYS['anthropic']} in Secret {col.secret}); edit it if you use another",
        )
    _cross_check(col)
    out = Output()
    meta = _meta_factory(namespace)
    ws_spec: dict[str, Any] = {}
    if col.descriptions:
        ws_spec["description"] = "\n".join(d.strip() for d in col.descriptions)
    for key, pieces in (
        ("modelProviders", col.model_providers),
        ("mcpServers", col.mcp_servers),
        ("tools", col.tools),
        ("permissionBundles", col.permission_bundles),
        ("credentials", col.credentials),
    ):
        if pieces:
            ws_spec[key] = [p.body for p in pieces]
    need_workspace = bool(ws_spec or col.agents or col.topologies)
    if need_workspace:
        out.manifests.append(_manifest("Workspace", meta(col.workspace, {}), ws_spec))
    for cm in col.config_maps:
        out.manifests.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta(cm.name, cm.annotations),
                **cm.body,
            }
        )
    for kind, pieces in (
        ("Skill", col.skills),
        ("Agent", col.agents),
        ("Topology", col.topologies),
    ):
        for p in pieces:
            out.manifests.append(_manifest(kind, meta(p.name, p.annotations), p.body))
    for m in out.manifests:
        m["metadata"].setdefault("annotations", {})[SYNC_WAVE] = WAVES[m["kind"]]
        if m["apiVersion"] != API_VERSION:
            continue
        try:
            validate_manifest(m)
        except ManifestError as exc:
            src = _origin(col, m)
            for err in exc.errors:
                report.error(
                    src[0],
                    src[1],
                    err.path,
                    f"{m['kind']} {m['metadata']['name']!r}: {err.message}",
                )
    if col.secret_keys:
        out.secret_template = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta(col.secret, {}),
            "type": "Opaque",
            "stringData": {k: "" for k in sorted(col.secret_keys)},
        }
    return out


def _manifest(kind: str, metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def _meta_factory(namespace: str | None) -> Any:
    def meta(name: str, annotations: dict[str, str]) -> dict[str, Any]:
        m: dict[str, Any] = {"name": name}
        if namespace:
            m["namespace"] = namespace
        if annotations:
            m["annotations"] = dict(annotations)
        return m

    return meta


def _origin(col: Collected, manifest: dict[str, Any]) -> tuple[str, int | None]:
    name = manifest["metadata"]["name"]
    pieces = {"Skill": col.skills, "Agent": col.agents, "Topology": col.topologies}.get(
        manifest["kind"], []
    )
    for p in pieces:
        if p.name == name:
            return p.src.file, p.src.line
    first = next(iter(col.mcp_servers + col.tools + col.permission_bundles), None)
    return (first.src.file, None) if first else ("(workspace)", None)


def _unique(col: Collected, label: str, pieces: list[Piece]) -> None:
    seen: dict[str, Piece] = {}
    for p in list(pieces):
        if p.name in seen:
            first = seen[p.name].src
            col.report.error(
                p.src.file,
                p.src.line,
                p.src.field(),
                f"{label} {p.name!r} is defined twice (first at {first.file}:{first.line})",
            )
            pieces.remove(p)
        else:
            seen[p.name] = p


def _resolve_node_agents(col: Collected) -> None:
    """Topology nodes that add to an archetype: the archetype's spec plus the additions."""
    by_name = {p.name: p for p in col.agents}
    for p in col.agents:
        if "__base__" not in p.body:
            continue
        base_name = p.body.pop("__base__")
        spec: dict[str, Any] = {"workspaceRef": {"name": col.workspace}}
        if base_name is not None:
            base = by_name.get(base_name)
            if base is None or "__base__" in base.body:
                col.report.error(
                    p.src.file,
                    p.src.line,
                    p.src.field("archetype"),
                    f"archetype {base_name!r} is not among the imported archetypes",
                )
                continue
            spec.update({k: v for k, v in base.body.items() if k != "skills"})
            skills = list(base.body.get("skills", []))
        else:
            skills = []
        for s in p.body.pop("skills", []):
            if s not in skills:
                skills.append(s)
        spec.update(p.body)
        if skills:
            spec["skills"] = skills
        p.body = spec
        p.annotations = {**p.annotations, **source_annotation(p.src)}


def _cross_check(col: Collected) -> None:
    report = col.report
    skills = {p.name for p in col.skills}
    topologies = {p.name for p in col.topologies}
    agents = {p.name for p in col.agents}
    bundles = {p.name for p in col.permission_bundles}
    servers = {p.name for p in col.mcp_servers}
    prefixes = {p.body.get("prefix") or p.name.replace("-", "_") for p in col.mcp_servers}
    tools = {p.name for p in col.tools}
    credentials = {p.name for p in col.credentials}
    for p in col.agents:
        spec = p.body
        bundle = spec.get("permissionsBundle")
        if bundle is not None and bundle not in bundles:
            report.error(
                p.src.file,
                p.src.doc.line(*p.src.path, "permissions_bundle"),
                p.src.field("permissions_bundle"),
                f"permission bundle {bundle!r} is not defined in any policy.yaml "
                f"(known: {', '.join(sorted(bundles)) or 'none'})",
            )
        for grant in spec.get("skills", []):
            if isinstance(grant, str) and not grant.startswith("pack:") and grant not in skills:
                report.warn(
                    p.src.file,
                    p.src.line,
                    p.src.field("skills"),
                    f"skill {grant!r} is not in this import; the grant stays inert "
                    "until a Skill of that name exists",
                )
        for tool in spec.get("tools", []):
            known = (
                tool in tools
                or tool in PLATFORM_BUILTINS
                or (isinstance(tool, str) and tool.split(".", 1)[0] in prefixes and "." in tool)
            )
            if not known:
                report.warn(
                    p.src.file,
                    p.src.line,
                    p.src.field("tools"),
                    f"tool {tool!r} is neither an imported tool, an MCP tool "
                    "<prefix>.<tool> of an imported server, nor a platform builtin",
                )
    for p in col.topologies:
        for node in p.body.get("agents", []):
            ref = node["agentRef"]["name"]
            if ref not in agents:
                report.error(
                    p.src.file,
                    p.src.doc.line(*p.src.path, "agents", node["name"]),
                    p.src.field("agents", node["name"]),
                    f"node {node['name']!r}: archetype {ref!r} is not among the "
                    "imported archetypes",
                )
    for p in col.skills:
        impl = p.body.get("implementation") or {}
        where = (
            p.src.file,
            p.src.doc.line(*p.src.path, "implementation"),
            p.src.field("implementation"),
        )
        if impl.get("type") == "mcp_tool" and impl.get("server") not in servers:
            report.warn(
                *where,
                f"MCP server {impl.get('server')!r} is not declared in the "
                "imported workspace; calls fail until it is",
            )
        if impl.get("topology") and impl["topology"] not in topologies:
            report.warn(*where, f"topology {impl['topology']!r} is not in this import")
        if impl.get("credentialsRef") and impl["credentialsRef"] not in credentials:
            report.warn(
                *where,
                f"credentials {impl['credentialsRef']!r} is not a credentials "
                "entry of the imported workspace",
            )
