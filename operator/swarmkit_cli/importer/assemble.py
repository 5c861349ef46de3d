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
from urllib.parse import urlsplit

from swarmkit_api import API_VERSION, ManifestError, validate_manifest
from swarmkit_api.workspace import PLATFORM_BUILTINS

from . import swarm, swarmkit_agents
from .collected import Collected, Piece
from .common_map import PROVIDER_KEYS, ensure_provider
from .sizes import CONFIG_MAP_LIMIT, MAX_SKILL_BYTES, rendered_skill_bytes

SYNC_WAVE = "argocd.argoproj.io/sync-wave"
WAVES = {"ConfigMap": "0", "Workspace": "0", "Skill": "1", "Agent": "2", "Topology": "3"}


@dataclass
class Output:
    """The manifests to write (in apply order) and the Secret template kept apart."""

    manifests: list[dict[str, Any]] = field(default_factory=list)
    secret_template: dict[str, Any] | None = None
    #: Secret key → what to put there (written as comments in the template)
    secret_hints: dict[str, str] = field(default_factory=dict)


def assemble(col: Collected, namespace: str | None) -> Output:
    """Check what the readers collected (reporting into ``col.report``) and assemble the
    manifests in apply order, each validated, with the Secret template kept apart."""
    _prepare(col)
    out = Output()
    meta = _meta_factory(namespace)
    ws_spec = _workspace_spec(col)
    need_workspace = bool(ws_spec or col.agents or col.topologies or col.workspace_annotations)
    if need_workspace:
        out.manifests.append(
            _manifest("Workspace", meta(col.workspace, col.workspace_annotations), ws_spec)
        )
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
        _validate(col, m)
    if col.secret_keys:
        out.secret_template = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta(col.secret, {}),
            "type": "Opaque",
            "stringData": {k: "" for k in sorted(col.secret_keys)},
        }
        out.secret_hints = {k: v for k, v in col.secret_hints.items() if k in col.secret_keys}
    return out


def _prepare(col: Collected) -> None:
    """The readers' pieces finalized, each name once, providers and Workspace filled in,
    then cross-checked (references, credential hosts, sizes)."""
    swarmkit_agents.finalize(col)
    swarm.finalize(col)
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
    _providers(col)
    for p in col.agents:
        p.body["workspaceRef"] = {"name": col.workspace}
    for p in col.topologies:
        p.body["workspaceRef"] = {"name": col.workspace}
    _cross_check(col)
    _allowed_hosts(col)
    _sizes(col)


def _workspace_spec(col: Collected) -> dict[str, Any]:
    """The Workspace's spec from the collected descriptions, governance and pieces."""
    ws_spec: dict[str, Any] = {}
    if col.descriptions:
        ws_spec["description"] = "\n".join(d.strip() for d in col.descriptions)
    if col.governance:
        ws_spec["governance"] = dict(col.governance)
    for key, pieces in (
        ("modelProviders", col.model_providers),
        ("mcpServers", col.mcp_servers),
        ("tools", col.tools),
        ("permissionBundles", col.permission_bundles),
        ("credentials", col.credentials),
    ):
        if pieces:
            ws_spec[key] = [p.body for p in pieces]
    return ws_spec


def _validate(col: Collected, m: dict[str, Any]) -> None:
    """A swarmkit manifest checked as admission would, each error reported at its source."""
    if m["apiVersion"] != API_VERSION:
        return
    try:
        validate_manifest(m)
    except ManifestError as exc:
        src = _origin(col, m)
        for err in exc.errors:
            col.report.error(
                src[0],
                src[1],
                err.path,
                f"{m['kind']} {m['metadata']['name']!r}: {err.message}",
            )


def _providers(col: Collected) -> None:
    """Agents and no provider: upstream's own (anthropic); then agents naming no model get
    the Workspace's default model (:func:`swarm.default_models`)."""
    if col.agents and not col.model_providers:
        first = col.agents[0].src
        ensure_provider(col, "anthropic", first)
        col.report.warn(
            first.file,
            first.line,
            first.field("model"),
            "no model provider in the sources: added provider 'anthropic' (API key "
            f"{PROVIDER_KEYS['anthropic']} in Secret {col.secret}); edit it if you use another",
        )
    swarm.default_models(col)


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


def _cross_check(col: Collected) -> None:
    """References across files, checked as the sources' own runtimes would."""
    known = _Known(
        skills=frozenset(p.name for p in col.skills),
        bundles=frozenset(p.name for p in col.permission_bundles),
        prefixes=frozenset(
            p.body.get("prefix") or p.name.replace("-", "_") for p in col.mcp_servers
        ),
        tools=frozenset(p.name for p in col.tools),
        providers=frozenset(p.name for p in col.model_providers),
    )
    for p in col.agents:
        _check_agent(col, known, p)
    _check_topologies(col)
    _check_skills(col)


@dataclass(frozen=True)
class _Known:
    """The names an imported Agent may refer to."""

    skills: frozenset[str]
    bundles: frozenset[str]
    prefixes: frozenset[str]
    tools: frozenset[str]
    providers: frozenset[str]


def _check_agent(col: Collected, known: _Known, p: Piece) -> None:
    """An Agent's model provider, permission bundle, skill grants and tools."""
    report = col.report
    spec = p.body
    provider = (spec.get("model") or {}).get("provider")
    if provider is not None and provider not in known.providers:
        report.warn(
            p.src.file,
            p.src.line,
            p.src.field("model"),
            f"model provider {provider!r} is neither declared in the workspace nor one "
            "upstream registers on its own; the Agent is not Ready until a Workspace "
            "modelProviders entry of that name exists",
        )
    bundle = spec.get("permissionsBundle")
    if bundle is not None and bundle not in known.bundles:
        report.error(
            p.src.file,
            p.src.doc.line(*p.src.path, "permissions_bundle"),
            p.src.field("permissions_bundle"),
            f"permission bundle {bundle!r} is not defined in any policy.yaml "
            f"(known: {', '.join(sorted(known.bundles)) or 'none'})",
        )
    for grant in spec.get("skills", []):
        if isinstance(grant, str) and not grant.startswith("pack:") and grant not in known.skills:
            report.warn(
                p.src.file,
                p.src.line,
                p.src.field("skills"),
                f"skill {grant!r} is not in this import; the grant stays inert "
                "until a Skill of that name exists",
            )
    for tool in spec.get("tools", []):
        if not (
            tool in known.tools
            or tool in PLATFORM_BUILTINS
            or (isinstance(tool, str) and tool.split(".", 1)[0] in known.prefixes and "." in tool)
        ):
            report.warn(
                p.src.file,
                p.src.line,
                p.src.field("tools"),
                f"tool {tool!r} is neither an imported tool, an MCP tool "
                "<prefix>.<tool> of an imported server, nor a platform builtin",
            )


def _check_topologies(col: Collected) -> None:
    """Every topology node's archetype is an imported one."""
    agents = {p.name for p in col.agents}
    for p in col.topologies:
        for node in p.body.get("agents", []):
            ref = node["agentRef"]["name"]
            if ref not in agents:
                col.report.error(
                    p.src.file,
                    p.src.doc.line(*p.src.path, "agents", node["name"]),
                    p.src.field("agents", node["name"]),
                    f"node {node['name']!r}: archetype {ref!r} is not among the "
                    "imported archetypes",
                )


def _check_skills(col: Collected) -> None:
    """A skill's MCP server, child topology and credentials are in the import."""
    topologies = {p.name for p in col.topologies}
    servers = {p.name for p in col.mcp_servers}
    credentials = {p.name for p in col.credentials}
    for p in col.skills:
        impl = p.body.get("implementation") or {}
        where = (
            p.src.file,
            p.src.doc.line(*p.src.path, "implementation"),
            p.src.field("implementation"),
        )
        if impl.get("type") == "mcp_tool" and impl.get("server") not in servers:
            col.report.warn(
                *where,
                f"MCP server {impl.get('server')!r} is not declared in the "
                "imported workspace; calls fail until it is",
            )
        if impl.get("topology") and impl["topology"] not in topologies:
            col.report.warn(*where, f"topology {impl['topology']!r} is not in this import")
        if impl.get("credentialsRef") and impl["credentialsRef"] not in credentials:
            col.report.warn(
                *where,
                f"credentials {impl['credentialsRef']!r} is not a credentials "
                "entry of the imported workspace",
            )


def _allowed_hosts(col: Collected) -> None:
    """A credential goes only to its ``allowedHosts``: the hosts of the imported skills
    and HTTP MCP servers that send it are what the source workspace meant; listed, and
    said so."""
    by_name = {p.name: p for p in col.credentials}
    sends: list[tuple[Piece | None, str]] = [
        (
            by_name.get((p.body.get("implementation") or {}).get("credentialsRef") or ""),
            str((p.body.get("implementation") or {}).get("cardUrl") or ""),
        )
        for p in col.skills
    ]
    for server in col.mcp_servers:
        for header in server.body.get("headers") or ():
            piece = next(
                (c for c in col.credentials if c.body["secretKeyRef"] == header["secretKeyRef"]),
                None,
            )
            sends.append((piece, str(server.body.get("url") or "")))
    for piece, url in sends:
        host = urlsplit(url).hostname
        if piece is None or not host:
            continue
        hosts = piece.body.setdefault("allowedHosts", [])
        if host.lower() not in hosts:
            hosts.append(host.lower())
    for piece in col.credentials:
        if piece.body.get("allowedHosts"):
            col.report.note(
                f"credential {piece.name!r}: allowedHosts {', '.join(piece.body['allowedHosts'])}"
                " (the hosts of the skills and MCP servers that send it); it goes nowhere else"
            )


def _sizes(col: Collected) -> None:
    """What the apiserver or the operator would refuse for its size, reported now."""
    for p in col.skills:
        size = rendered_skill_bytes(p.body, int(p.extra.get("external_bytes", 0)))
        if size > MAX_SKILL_BYTES:
            col.report.error(
                p.src.file,
                p.src.line,
                p.src.field(),
                f"Skill {p.name!r} renders to about {size} bytes, over the operator's "
                f"{MAX_SKILL_BYTES}-byte limit (it would end TooLarge): split it into smaller "
                "skills or leave its largest files out",
            )
    for cm in col.config_maps:
        data = cm.body.get("binaryData", {})
        size = sum(len(k) + len(v) * 3 // 4 for k, v in data.items())
        size += sum(len(k) + len(v.encode()) for k, v in cm.body.get("data", {}).items())
        if size > CONFIG_MAP_LIMIT:
            col.report.error(
                cm.src.file,
                None,
                "",
                f"ConfigMap {cm.name!r} would hold {size} bytes, over the apiserver's "
                f"{CONFIG_MAP_LIMIT}-byte limit: a single file this large cannot be bundled",
            )
