"""Swarm bundles (upstream ``platform-spec.yaml``) → swarmkit.dev objects.

``agents.yaml`` (map key → agent): ``intent`` (a file beside agents.yaml, or
``{inline: ...}``) → ``systemPrompt``; ``model`` (an alias such as ``regular``, resolved with
``--model-alias`` or upstream's built-in defaults); permissions, bundles, tools, native
tools, flow data. ``policy.yaml`` ``mcp_servers`` and ``permission_bundles`` → the
Workspace; ``tools.yaml`` → Workspace tools (:mod:`.swarm_tools`). Flows nest under
``flows/<flow>/``; a child flow's tool or bundle of the same name overrides the root's for
that flow's agents (imported as ``<flow>_<tool>`` / ``<flow>-<bundle>``). Event routing
(subscriptions, emit events, nodes, state machines) has no equivalent and is reported.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

from swarmkit_api.common import KEBAB_RE
from swarmkit_api.workspace import McpServer, PermissionBundle

from .collected import DISPLAY_NAME_ANNOTATION, Collected, Piece, source_annotation
from .common_map import ensure_provider, mcp_server
from .mapping import Fields, Src, check, to_camel
from .safefs import Refused, read_inside
from .swarm_tools import read_tools

__all__ = ["default_models", "finalize", "read_agents", "read_package", "read_policy", "read_tools"]

#: Upstream's built-in aliases and their Anthropic defaults (model_alias_authority).
BUILTIN_ALIASES = {
    "cheap": "anthropic/claude-3-5-haiku",
    "regular": "anthropic/claude-3-5-sonnet",
    "frontier": "anthropic/claude-3-opus",
}
EVENT_FIELDS = (
    "subscriptions",
    "emit_events",
    "manager_fallback",
    "criteria",
    "entity_writes",
    "node_type",
    "implementation",
)
AGENT_FIELDS = (
    "id, type, role, intent, model, memory, tools, permissions, permissions_bundle, "
    "native_tools, flow_data_access, max_turns_per_task, description, skills"
)


def _scope(src: Src) -> str:
    return PurePosixPath(Path(src.file).parent.as_posix()).as_posix()


def read_package(col: Collected, src: Src) -> None:
    """``package.yaml``: the bundle's identity (the root package names the Workspace unless
    ``--workspace`` or a SwarmKit workspace does); child flows are found by the walk."""
    f = Fields(col.report, src)
    name, version, desc = f.take("name"), f.take("version"), f.take("description")
    if "swarm.dev/package" in col.workspace_annotations:
        f.take_all()
        return
    if isinstance(desc, str) and desc.strip():
        col.descriptions.append(desc)
    if isinstance(name, str):
        col.workspace_annotations["swarm.dev/package"] = f"{name}@{version}"
        kebab = name.replace("_", "-").lower()
        named = "swarmkit.dev/workspace-id" in col.workspace_annotations
        if KEBAB_RE.match(kebab) and len(kebab) <= 63 and not col.workspace_fixed and not named:
            col.workspace = kebab
            col.secret = f"{kebab}-credentials"
            col.workspace_annotations["swarmkit.dev/workspace-id"] = kebab
    for key in ("connect", "handoffs", "provider_trigger_events"):
        f.unsupported(
            key,
            "routing events between flows has no equivalent; a Topology or a Run drives the agents",
        )
    for key in ("packages", "connector_packs", "requires"):
        f.unsupported(key, "imported packages are not resolved; import their directories too")
    f.take_all()  # identity and layout (flows/ is found by the directory walk)


def read_policy(col: Collected, src: Src) -> None:
    f = Fields(col.report, src)
    if "mcp_servers" in f:
        servers = f.sub("mcp_servers")
        for sid, _ in servers.take_all().items():
            sf = Fields(col.report, servers.src.at(sid))
            server_id = str(sid).replace("_", "-")
            sf.take("description")
            body = mcp_server(col, sf, server_id)
            if "prefix" not in body and server_id != str(sid):
                body["prefix"] = str(sid)  # keep the tool names agents already use
            key = sf.take("credentials_key")
            if key is not None:
                ref = col.secret_ref(str(key), sf.src.at("credentials_key"))
                if body.get("transport") == "http":
                    body.setdefault("headers", []).append(
                        {"name": "Authorization", "secretKeyRef": ref, "prefix": "Bearer "}
                    )
                else:
                    body.setdefault("env", []).append(
                        {"name": str(key).upper(), "secretKeyRef": ref}
                    )
            for k in ("rate_limit", "rate_limit_max_wait"):
                sf.unsupported(k, "calls are not rate-limited by the runner")
            url = body.get("url")
            if isinstance(url, str) and "{{" in url:
                sf.error(
                    "url",
                    f"{url!r}: policy variable substitution is not imported; "
                    "write the server's URL",
                )
                continue
            sf.finish("description, transport, url, command, args, prefix, credentials_key, env")
            if check(col.report, McpServer, body, sf.src, f"MCP server {sid!r}"):
                col.mcp_servers.append(Piece(server_id, body, sf.src, extra={"scope": _scope(src)}))
    if "permission_bundles" in f:
        bundles = f.sub("permission_bundles")
        for bname, _ in bundles.take_all().items():
            bf = Fields(col.report, bundles.src.at(bname))
            body = {"name": str(bname).replace("_", "-")}
            for k in ("description", "permissions"):
                if k in bf:
                    body[k] = bf.take(k)
            bf.finish("description, permissions")
            if check(col.report, PermissionBundle, body, bf.src, f"permission bundle {bname!r}"):
                col.permission_bundles.append(
                    Piece(body["name"], body, bf.src, extra={"scope": _scope(src)})
                )
    f.unsupported(
        "web_search_provider",
        "native web_search needs the Workspace searchProvider (a URL); set it by hand",
    )
    values = [k for k in f.data if k not in f.taken]
    if values:
        f.warn(values[0], f"policy values {values} configure the flow's handlers; not imported")
        f.take_all()


def read_agents(col: Collected, src: Src) -> None:
    top = Fields(col.report, src)
    for key, _ in top.take_all().items():
        _agent(col, Fields(col.report, src.at(key)), str(key))


def _agent(col: Collected, af: Fields, key: str) -> None:
    ident = af.take("id", key)
    name = str(ident).replace("_", "-")
    annotations = source_annotation(af.src)
    if not KEBAB_RE.match(name) or len(name) > 63:
        af.error("id" if "id" in af else None, f"{ident!r} cannot become an Agent name")
        return
    if name != ident:
        af.warn(None, f"agent {ident!r} imported as {name!r} (names are lowercase-kebab)")
        annotations[DISPLAY_NAME_ANNOTATION] = str(ident)
    spec: dict[str, Any] = {"workspaceRef": {"name": col.workspace}}
    prompt = _intent(col, af)
    if prompt is None:
        return
    spec["systemPrompt"] = prompt
    model = _model(col, af)
    if model is not None:
        spec["model"] = model
    kind = af.take("type")
    if kind not in (None, "generic"):
        af.warn("type", f"agent type {kind!r}: imported as a generic agent")
    role = af.take("role")
    if isinstance(role, str):
        annotations["swarm.dev/role"] = role
    if af.take("memory") is True:
        af.warn(
            "memory", "every Run starts the agent fresh; memory between invocations is not kept"
        )
    if "skills" in af:
        # not a Swarm field: VectorStep-style skill grants, accepted on Swarm agents too
        spec["skills"] = list(af.take("skills") or [])
    for k in ("tools", "permissions", "flow_data_access"):
        if k in af:
            spec[to_camel(k)] = af.take(k)
    if "permissions_bundle" in af:
        spec["permissionsBundle"] = str(af.take("permissions_bundle")).replace("_", "-")
    if "description" in af:
        spec["description"] = af.take("description")
    if "max_turns_per_task" in af:
        spec["maxSteps"] = af.take("max_turns_per_task")
    if "native_tools" in af:
        nt = af.sub("native_tools")
        spec["nativeTools"] = {
            to_camel(k): nt.take(k) for k in ("bash", "web_search", "file_io") if k in nt
        }
        nt.finish("bash, web_search, file_io")
    events = [k for k in EVENT_FIELDS if k in af]
    if events:
        for k in events:
            af.take(k)
        af.warn(
            events[0],
            f"{', '.join(events)}: event routing is not imported (an Agent is "
            "run by a Topology or a Run, not by events)",
        )
    af.unsupported("workspace_class", "every Run has its own scratch workspace")
    af.unsupported("mock", "test doubles are not imported; use the Agent's replay turns")
    af.finish(AGENT_FIELDS)
    extra = {"scope": _scope(af.src), "default_model": "model" not in af}
    col.agents.append(Piece(name, spec, af.src, annotations, extra=extra))


def _intent(col: Collected, af: Fields) -> str | None:
    """The agent's one business-intent source (upstream ``agent_intent_model``)."""
    if "intent" not in af:
        af.error(None, "intent is required (a file path beside agents.yaml, or {inline: ...})")
        return None
    value = af.take("intent")
    if isinstance(value, str):
        rel = PurePosixPath(value)
        if rel.is_absolute() or ".." in rel.parts or "\\" in value or not value.strip():
            af.error("intent", f"{value!r} must be a relative path inside the bundle")
            return None
        try:
            path, text = read_inside(Path(af.src.file).parent, value)
            col.used_files.add(str(path))
        except Refused as exc:
            af.error("intent", f"the intent file {value!r} is not read: {exc}")
            return None
        except UnicodeDecodeError as exc:
            af.error("intent", f"cannot read the intent file {value!r}: {exc}")
            return None
    elif isinstance(value, dict) and set(value) == {"inline"}:
        text = value["inline"]
    elif isinstance(value, dict) and "import" in value:
        af.error(
            "intent",
            "intent {import: ...} is rejected by Swarm itself until agent packs "
            "land; write the intent inline or in a file",
        )
        return None
    else:
        af.error("intent", "expected a file path or {inline: text}")
        return None
    if not isinstance(text, str) or not text.strip():
        af.error("intent", "the intent is empty")
        return None
    return text


def _model(col: Collected, af: Fields) -> dict[str, Any] | None:
    if "model" not in af:
        # The Workspace's default model; :func:`default_models` names it once providers are known.
        return None
    alias = af.take("model")
    if not isinstance(alias, str) or not alias:
        af.error("model", f"expected a model alias, got {alias!r}")
        return None
    target = col.model_aliases.get(alias)
    if target is None and "/" in alias:
        target = alias
    if target is None and alias in BUILTIN_ALIASES:
        target = BUILTIN_ALIASES[alias]
        af.warn(
            "model",
            f"alias {alias!r} resolved to upstream's built-in Anthropic default "
            f"{target}; choose with --model-alias {alias}=PROVIDER/MODEL",
        )
    if target is None:
        af.warn(
            "model",
            f"{alias!r} is not a built-in alias; imported as the model name of "
            f"the Workspace's first provider (or --model-alias {alias}=PROVIDER/MODEL)",
        )
        return {"name": alias}
    provider, _, name = target.partition("/")
    ensure_provider(col, provider, af.src.at("model"))
    return {"provider": provider, "name": name}


def default_models(col: Collected) -> None:
    """Agents that name no model run on the Workspace's default: its first provider's
    ``defaultModel``. A provider the import added for upstream (no ``defaultModel``) gets
    the model of upstream's ``regular`` alias; each such agent is warned, the model named."""
    agents = [a for a in col.agents if a.extra.get("default_model")]
    if not agents or not col.model_providers:
        return
    provider = col.model_providers[0]
    model = provider.body.get("defaultModel")
    regular_provider, _, regular = BUILTIN_ALIASES["regular"].partition("/")
    if model is None and provider.name == regular_provider:
        model = provider.body["defaultModel"] = regular
    for agent in agents:
        col.report.warn(
            agent.src.file,
            agent.src.line,
            agent.src.field("model"),
            f"no model: imported with the Workspace's default model, {provider.name}/{model} "
            "(its first provider's defaultModel); name one with model: ALIAS"
            if model is not None
            else f"no model: imported with the Workspace's default model, but provider "
            f"{provider.name!r} names no defaultModel; set one or its Runs fail",
        )


def _in_flow(agent: Piece, scope: str) -> bool:
    a = PurePosixPath(agent.extra.get("scope", ""))
    return a == PurePosixPath(scope) or PurePosixPath(scope) in a.parents


def finalize(col: Collected) -> None:
    """Child-flow overrides, then tools that require a permission."""
    _overrides(col, col.tools, "tools", "_", "tool")
    _overrides(col, col.permission_bundles, "permissionsBundle", "-", "permission bundle")
    _mcp_duplicates(col)
    required = {
        t.name: t.extra["requires_permission"]
        for t in col.tools
        if "requires_permission" in t.extra
    }
    bundles = {b.name: set(b.body.get("permissions", [])) for b in col.permission_bundles}
    for a in col.agents:
        tools = a.body.get("tools")
        if not tools or not required:
            continue
        held = set(a.body.get("permissions", [])) | bundles.get(
            a.body.get("permissionsBundle", ""), set()
        )
        keep = []
        for tool in tools:
            need = required.get(tool)
            if need is not None and need not in held:
                col.report.warn(
                    a.src.file,
                    a.src.line,
                    a.src.field("tools"),
                    f"tool {tool!r} requires permission {need!r}, which agent "
                    f"{a.name!r} does not hold: not granted (Swarm refuses "
                    "the call)",
                )
            else:
                keep.append(tool)
        a.body["tools"] = keep


def _overrides(col: Collected, pieces: list[Piece], field: str, sep: str, label: str) -> None:
    by_name: dict[str, list[Piece]] = {}
    for p in pieces:
        if "scope" in p.extra:
            by_name.setdefault(p.name, []).append(p)
    for name, group in by_name.items():
        if len(group) < 2:
            continue
        group.sort(key=lambda p: len(PurePosixPath(p.extra["scope"]).parts))
        base = group[0]
        for p in group[1:]:
            if p.body == base.body:
                pieces.remove(p)
                continue
            flow = PurePosixPath(p.extra["scope"]).name
            new = re.sub(r"[^a-z0-9]+", sep, f"{flow}{sep}{name}".lower()).strip(sep)
            p.name = new
            p.body["name"] = new
            for a in col.agents:
                if not _in_flow(a, p.extra["scope"]):
                    continue
                value = a.body.get(field)
                if isinstance(value, list) and name in value:
                    a.body[field] = [new if v == name else v for v in value]
                elif value == name:
                    a.body[field] = new


def _mcp_duplicates(col: Collected) -> None:
    seen: dict[str, Piece] = {}
    for p in list(col.mcp_servers):
        first = seen.get(p.name)
        if first is not None and first.body == p.body and "scope" in p.extra:
            col.mcp_servers.remove(p)
        else:
            seen.setdefault(p.name, p)
