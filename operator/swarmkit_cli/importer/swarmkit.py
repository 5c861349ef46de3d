"""SwarmKit workspaces → swarmkit.dev objects.

``workspace.yaml`` (MCP servers, credentials), ``apiVersion: swarmkit/v1`` documents of
kind ``Skill``, ``Archetype`` (→ an Agent whose grants are the archetype's defaults) and
``Topology`` (an agent tree by node name → a Topology, plus an Agent per node that adds to
its archetype). The README's "SwarmKit" table lists every rule.
"""

from __future__ import annotations

from typing import Any

from swarmkit_api.common import KEBAB_RE
from swarmkit_api.skill import SkillSpec
from swarmkit_api.workspace import McpServer

from .collected import DISPLAY_NAME_ANNOTATION, Collected, Piece, source_annotation
from .common_map import json_schema, mcp_server, model_selection
from .mapping import Fields, Src, check, to_camel

SWARMKIT_API = "swarmkit/v1"
IMPLEMENTATION_FIELDS = (
    *("type", "server", "tool", "arguments", "prompt", "model", "composes", "strategy"),
    *("pack", "command", "topology", "card_url", "skill_id", "credentials_ref", "timeout_s"),
    *("on_unanswerable", "max_agent_answers", "permission", "effects"),
)
CONSTRAINT_FIELDS = ("max_latency_ms", "timeout_seconds", "on_failure", "output_retries")


def _metadata(col: Collected, fields: Fields) -> tuple[str | None, dict[str, str], str | None]:
    """``metadata {id, name, description}`` → (object name, annotations, description)."""
    meta = fields.sub("metadata")
    obj_id = meta.take("id")
    display = meta.take("name")
    description = meta.take("description")
    meta.unsupported("labels", "SwarmKit labels have no meaning here; add Kubernetes labels")
    meta.finish("id, name, description")
    annotations = source_annotation(fields.src)
    if isinstance(display, str) and display:
        annotations[DISPLAY_NAME_ANNOTATION] = display
    if obj_id is None:
        fields.error("metadata", "metadata.id is required (it becomes metadata.name)")
    elif not isinstance(obj_id, str) or not KEBAB_RE.match(obj_id) or len(obj_id) > 63:
        meta.error(
            "id",
            f"{obj_id!r} must be lowercase-kebab, at most 63 characters (it becomes metadata.name)",
        )
        obj_id = None
    return (str(obj_id) if obj_id is not None else None), annotations, description


def read_workspace(col: Collected, src: Src) -> None:
    """``workspace.yaml``: ``mcp_servers`` (list or mapping by id), ``credentials``,
    ``description``, optional ``apiVersion``/``kind``/``metadata``."""
    f = Fields(col.report, src)
    f.take("apiVersion")
    f.take("kind")
    if "metadata" in f:
        meta = f.sub("metadata")
        meta.take("id")
        meta.unsupported("name", "the Workspace keeps the name given by --workspace")
        desc = meta.take("description")
        if isinstance(desc, str):
            col.descriptions.append(desc)
        meta.finish("id, description")
    desc = f.take("description")
    if isinstance(desc, str):
        col.descriptions.append(desc)
    servers = f.take("mcp_servers")
    if isinstance(servers, dict):
        sub = f.sub("mcp_servers")
        for sid in sub.take_all():
            _server(col, Fields(col.report, sub.src.at(sid)), str(sid))
    elif isinstance(servers, list):
        for i, _ in enumerate(servers):
            sf = Fields(col.report, src.at("mcp_servers", i))
            sid = sf.take("id") or sf.take("name")
            if sid is None:
                sf.error(None, "an MCP server needs an id")
                continue
            _server(col, sf, str(sid))
    elif servers is not None:
        f.error("mcp_servers", "expected a list of servers (or a mapping by id)")
    creds = f.take("credentials")
    if isinstance(creds, dict):
        sub = f.sub("credentials")
        for name, value in sub.take_all().items():
            _credential(col, sub, str(name), value, sub.src.at(name))
    elif isinstance(creds, list):
        for i, _item in enumerate(creds):
            cf = Fields(col.report, src.at("credentials", i))
            name = cf.take("id") or cf.take("name")
            value = cf.take("value")
            cf.finish("id, value")
            if name is None:
                cf.error(None, "a credential needs an id")
                continue
            _credential(col, cf, str(name), value, cf.src)
    elif creds is not None:
        f.error("credentials", "expected a list of {id, value} (or a mapping id: value)")
    for key, why in (
        ("archetypes", "archetypes are read from their own files"),
        ("topologies", "topologies are read from their own files"),
        ("skills", "skills are read from their own files (pass their directory)"),
    ):
        f.unsupported(key, why)
    f.finish("mcp_servers, credentials, description")


def _server(col: Collected, f: Fields, sid: str) -> None:
    f.take("id")
    f.take("name")
    body = mcp_server(col, f, sid)
    f.finish(
        "id, transport, command, args, url, prefix, env, headers, permission, "
        "timeout_seconds, retries"
    )
    if check(col.report, McpServer, body, f.src, f"MCP server {sid!r}"):
        col.mcp_servers.append(Piece(sid, body, f.src))


def _credential(col: Collected, f: Fields, name: str, value: Any, src: Src) -> None:
    var = col.secret_var(value)
    if var is None:
        f.report.error(
            src.file,
            src.line,
            src.field(),
            "a credential must be ${VAR} (a Secret reference), never a literal",
        )
        return
    col.credentials.append(
        Piece(name, {"name": name, "secretKeyRef": col.secret_ref(var, src)}, src)
    )


def read_skill(col: Collected, src: Src) -> None:
    """``kind: Skill``: metadata.id → name; metadata.name → displayName; the rest camelCased."""
    f = Fields(col.report, src)
    f.take("apiVersion")
    f.take("kind")
    name, annotations, description = _metadata(col, f)
    spec: dict[str, Any] = {}
    if isinstance(annotations.get(DISPLAY_NAME_ANNOTATION), str):
        spec["displayName"] = annotations.pop(DISPLAY_NAME_ANNOTATION)
    desc = f.take("description", description)
    if desc is not None:
        spec["description"] = desc.strip() if isinstance(desc, str) else desc
    for key in ("category",):
        if key in f:
            spec[key] = f.take(key)
    for key in ("inputs", "outputs"):
        schema = json_schema(f, key)
        if schema is not None:
            spec[key] = schema
    if "implementation" in f:
        impl = f.sub("implementation")
        spec["implementation"] = {
            to_camel(k): impl.take(k) for k in IMPLEMENTATION_FIELDS if k in impl
        }
        impl.finish(", ".join(IMPLEMENTATION_FIELDS))
    if "constraints" in f:
        cons = f.sub("constraints")
        out: dict[str, Any] = {to_camel(k): cons.take(k) for k in CONSTRAINT_FIELDS if k in cons}
        if "retry" in cons:
            retry = cons.sub("retry")
            out["retry"] = {k: retry.take(k) for k in ("attempts", "backoff") if k in retry}
            retry.finish("attempts, backoff")
        cons.finish(", ".join((*CONSTRAINT_FIELDS, "retry")))
        spec["constraints"] = out
    if "iam" in f:
        iam = f.sub("iam")
        spec["iam"] = {"requiredScopes": iam.take("required_scopes", [])}
        iam.finish("required_scopes")
    if "provenance" in f:
        prov = f.sub("provenance")
        spec["provenance"] = {
            to_camel(k): prov.take(k) for k in ("authored_by", "version") if k in prov
        }
        prov.finish("authored_by, version")
        if spec["provenance"].get("authoredBy") == "authored_by_swarm":
            prov.warn(
                "authored_by",
                "authored_by_swarm: the skill is locked until a reviewer approves its Review "
                "skill-<name>-<hash8> (kubectl swarmkit review approve)",
            )
    if "audit" in f:
        audit = f.sub("audit")
        keys = ("log_inputs", "log_outputs", "redact")
        spec["audit"] = {to_camel(k): audit.take(k) for k in keys if k in audit}
        audit.finish("log_inputs, log_outputs, redact")
    if "instructions" in f:
        spec["instructions"] = f.take("instructions")
    f.unsupported("requires", "skill prerequisites are checked by the runtime image, not the API")
    f.finish(
        "metadata, description, category, implementation, inputs, outputs, constraints, "
        "iam, provenance, audit, instructions"
    )
    if name is None:
        return
    rename = {"displayName": "metadata", "description": "metadata"}
    if check(col.report, SkillSpec, spec, src, f"Skill {name!r}", rename=rename):
        col.skills.append(Piece(name, spec, src, annotations))


def agent_fields(col: Collected, f: Fields, spec: dict[str, Any]) -> None:
    """Fields an archetype, a topology node and a Swarm agent share."""
    model = model_selection(col, f)
    if model is not None:
        spec["model"] = model
    for key in ("system_prompt", "prompt", "soul"):
        if key in f:
            spec["systemPrompt"] = f.take(key)
    for key in ("tools", "scopes", "permissions", "flow_data_access"):
        if key in f:
            spec[to_camel(key)] = f.take(key)
    for key in ("permissions_bundle", "max_steps", "description"):
        if key in f:
            spec[to_camel(key)] = f.take(key)
    if "native_tools" in f:
        nt = f.sub("native_tools")
        spec["nativeTools"] = {
            to_camel(k): nt.take(k) for k in ("bash", "web_search", "file_io") if k in nt
        }
        nt.finish("bash, web_search, file_io")
    output = json_schema(f, "output_schema")
    if output is not None:
        spec["outputSchema"] = output


AGENT_FIELDS = (
    "model, system_prompt (prompt, soul), tools, scopes, permissions, "
    "permissions_bundle, flow_data_access, max_steps, native_tools, output_schema"
)


def read_archetype(col: Collected, src: Src) -> None:
    """``kind: Archetype`` → an Agent; ``defaults.skills`` → its skill grants."""
    f = Fields(col.report, src)
    f.take("apiVersion")
    f.take("kind")
    name, annotations, description = _metadata(col, f)
    spec: dict[str, Any] = {"workspaceRef": {"name": col.workspace}}
    if description:
        spec["description"] = description.strip()
    f.unsupported("role", "roles are positions in a Topology (set per node there)")
    agent_fields(col, f, spec)
    if "defaults" in f:
        d = f.sub("defaults")
        if "skills" in d:
            spec["skills"] = list(d.take("skills") or [])
        agent_fields(col, d, spec)
        d.finish("skills, " + AGENT_FIELDS)
    f.finish("metadata, defaults, " + AGENT_FIELDS)
    if name is not None:
        col.agents.append(Piece(name, spec, src, annotations))


def read_topology(col: Collected, src: Src) -> None:
    """``kind: Topology``: ``agents`` maps node name → {archetype, role, parent, children,
    skills, ...}; a node that adds to its archetype gets its own Agent
    ``<topology>-<node>``."""
    f = Fields(col.report, src)
    f.take("apiVersion")
    f.take("kind")
    name, annotations, description = _metadata(col, f)
    spec: dict[str, Any] = {"workspaceRef": {"name": col.workspace}, "agents": []}
    if description:
        spec["description"] = description.strip()
    if "schedule" in f:
        sch = f.sub("schedule")
        spec["schedule"] = {
            to_camel(k): sch.take(k)
            for k in ("cron", "timezone", "input", "concurrency_policy", "suspend")
            if k in sch
        }
        sch.finish("cron, timezone, input, concurrency_policy, suspend")
    nodes = f.take("agents")
    f.finish("metadata, agents, schedule")
    if name is None:
        return
    if not isinstance(nodes, dict) or not nodes:
        f.error("agents", "expected a mapping of node name → {archetype, ...} with a root")
        return
    _nodes(col, name, f.sub("agents"), None, 0, spec["agents"])
    col.topologies.append(Piece(name, spec, src, annotations))


def _nodes(
    col: Collected,
    topology: str,
    level: Fields,
    parent: str | None,
    depth: int,
    out: list[dict[str, Any]],
) -> None:
    for node_name, _ in level.take_all().items():
        nf = Fields(col.report, level.src.at(node_name))
        archetype = nf.take("archetype") or nf.take("agent")
        explicit_parent = nf.take("parent") or nf.take("reports_to")
        role = nf.take("role")
        children = nf.take("children")
        extra: dict[str, Any] = {}
        if "skills" in nf:
            extra["skills"] = list(nf.take("skills") or [])
        agent_fields(col, nf, extra)
        nf.finish("archetype, role, parent, children, skills, " + AGENT_FIELDS)
        node_parent = parent if explicit_parent is None else str(explicit_parent)
        if role is None:
            role = "root" if node_parent is None else "leader" if children else "worker"
        agent = str(archetype) if archetype else None
        if extra or agent is None:
            # The node adds to (or has no) archetype: its own Agent, built at assembly.
            own = f"{topology}-{node_name}"
            col.agents.append(
                Piece(own, {"__base__": agent, **extra}, nf.src, source_annotation(nf.src))
            )
            agent = own
        node: dict[str, Any] = {"name": str(node_name), "agentRef": {"name": agent}, "role": role}
        if node_parent is not None:
            node["parent"] = node_parent
        out.append(node)
        if isinstance(children, dict):
            _nodes(col, topology, nf.sub("children"), str(node_name), depth + 1, out)
        elif children is not None:
            nf.error("children", "expected a mapping of node name → node")
