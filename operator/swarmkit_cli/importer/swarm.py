"""Swarm bundles → swarmkit.dev objects.

``tools.yaml`` (tool name → definition) → Workspace ``tools``; ``policy.yaml``
``mcp_servers`` (id → server, ``credentials_key`` → a bearer header from the generated
Secret) and ``permission_bundles`` → Workspace ``mcpServers`` / ``permissionBundles``;
``agents.yaml`` (agent name → definition) → Agents. The README's "Swarm" table lists every
rule.
"""

from __future__ import annotations

from typing import Any

from swarmkit_api.workspace import McpServer, PermissionBundle, Tool

from .collected import Collected, Piece, source_annotation
from .common_map import json_schema, mcp_server
from .mapping import Fields, Src, check, to_camel
from .swarmkit import AGENT_FIELDS, agent_fields

TOOL_FIELDS = (
    "description, handler_type, input_schema (parameters), output_schema (returns), "
    "http, response_mapping, credentials, permission, effects"
)


def read_tools(col: Collected, src: Src) -> None:
    top = Fields(col.report, src)
    for name, _ in top.take_all().items():
        _tool(col, Fields(col.report, src.at(name)), str(name))


def _tool(col: Collected, f: Fields, name: str) -> None:
    if not f.data:
        f.error(None, "expected a mapping with at least description")
        return
    body: dict[str, Any] = {"name": name}
    if "description" in f:
        body["description"] = f.take("description")
    handler = f.take("handler_type")
    if handler == "api_call":
        f.warn("handler_type", "api_call is the old name of http; imported as http")
        handler = "http"
    elif handler == "workflow_registered":
        f.warn("handler_type", "workflow_registered tools are not supported; tool not imported")
        f.take_all()
        return
    if handler is not None:
        body["handlerType"] = handler
    for key, alias in (("input_schema", "parameters"), ("output_schema", "returns")):
        schema = json_schema(f, key)
        if schema is None:
            schema = json_schema(f, alias)
        if schema is not None:
            body[to_camel(key)] = schema
    if "http" in f:
        h = f.sub("http")
        http = {
            to_camel(k): h.take(k)
            for k in ("method", "url", "headers", "timeout_seconds")
            if k in h
        }
        if isinstance(http.get("method"), str):
            http["method"] = http["method"].upper()
        h.finish("method, url, headers, timeout_seconds")
        body["http"] = http
    for key in ("response_mapping", "permission", "effects"):
        if key in f:
            body[to_camel(key)] = f.take(key)
    # Not accepted by Swarm either; kept so the model's own rule rejects them with its hint.
    for key in ("endpoint", "type"):
        if key in f:
            body[key] = f.take(key)
    if "credentials" in f:
        cred = f.take("credentials")
        var = col.secret_var(cred) if isinstance(cred, str) else None
        key_name = var or (cred if isinstance(cred, str) else None)
        if isinstance(cred, dict):
            cf = f.sub("credentials")
            key_name = cf.take("key") or cf.take("credentials_key")
            creds: dict[str, Any] = {}
            for k in ("header", "prefix"):
                if k in cf:
                    creds[k] = cf.take(k)
            cf.finish("key, header, prefix")
        else:
            creds = {}
        if not key_name:
            f.error("credentials", "expected a credentials key (string) or {key, header, prefix}")
        else:
            creds["secretKeyRef"] = col.secret_ref(str(key_name), f.src.at("credentials"))
            body["credentials"] = creds
    f.finish(TOOL_FIELDS)
    if check(
        col.report,
        Tool,
        body,
        f.src,
        f"tool {name!r}",
        rename={"inputSchema": "input_schema", "outputSchema": "output_schema"},
    ):
        col.tools.append(Piece(name, body, f.src))


def read_policy(col: Collected, src: Src) -> None:
    f = Fields(col.report, src)
    if "mcp_servers" in f:
        servers = f.sub("mcp_servers")
        for sid, _ in servers.take_all().items():
            sf = Fields(col.report, servers.src.at(sid))
            server_id = str(sid).replace("_", "-")
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
            sf.finish("transport, url, command, args, prefix, credentials_key, env, headers")
            if check(col.report, McpServer, body, sf.src, f"MCP server {sid!r}"):
                col.mcp_servers.append(Piece(server_id, body, sf.src))
    if "permission_bundles" in f:
        bundles = f.sub("permission_bundles")
        for bname, _ in bundles.take_all().items():
            bf = Fields(col.report, bundles.src.at(bname))
            body = {"name": str(bname)}
            for k in ("description", "permissions"):
                if k in bf:
                    body[k] = bf.take(k)
            bf.finish("description, permissions")
            if check(col.report, PermissionBundle, body, bf.src, f"permission bundle {bname!r}"):
                col.permission_bundles.append(Piece(str(bname), body, bf.src))
    f.unsupported(
        "web_search_provider",
        "native web_search needs the Workspace searchProvider (a URL); set it by hand",
    )
    f.finish("mcp_servers, permission_bundles")


def read_agents(col: Collected, src: Src) -> None:
    top = Fields(col.report, src)
    for name, _ in top.take_all().items():
        af = Fields(col.report, src.at(name))
        spec: dict[str, Any] = {"workspaceRef": {"name": col.workspace}}
        if "skills" in af:
            spec["skills"] = list(af.take("skills") or [])
        agent_fields(col, af, spec)
        af.finish("skills, " + AGENT_FIELDS)
        col.agents.append(Piece(str(name), spec, af.src, source_annotation(af.src)))
