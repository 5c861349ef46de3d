"""SwarmKit ``workspace.yaml`` → the Workspace (upstream ``workspace.schema.json``).

``metadata.id`` names the Workspace (unless ``--workspace`` does); ``credentials`` (a
mapping name → ``{source, config}``) become Workspace credentials backed by keys of the
generated Secret, whatever their ``source``; ``mcp_servers`` (stdio ``command`` or HTTP
``endpoint``, ``credentials_ref``, permission tiers); ``model_providers`` registrations;
``governance.limits``. Blocks that configure SwarmKit's own process (storage, server,
identity, compression, planning, synthesis) have no equivalent and are reported by name.
"""

from __future__ import annotations

import json
import re
from typing import Any

from swarmkit_api.common import ENV_NAME, KEBAB_RE
from swarmkit_api.workspace import McpServer, ModelProvider

from .collected import DISPLAY_NAME_ANNOTATION, Collected, Piece, annotation_key
from .common_map import KNOWN_PROVIDERS
from .mapping import Fields, Src, check

CREDENTIAL_SOURCES = (
    "env",
    "file",
    "hashicorp-vault",
    "aws-secrets-manager",
    "gcp-secret-manager",
    "azure-key-vault",
    "plugin",
)
TIERS = ("open", "cautious", "strict", "readonly")
_ENV_RE = re.compile(ENV_NAME)
UNSUPPORTED_BLOCKS = {
    "identity": "people sign in to Kubernetes; RBAC and Reviews decide who may do what",
    "storage": "Runs keep their state in the API (status, ConfigMaps) and their logs in pods",
    "context_compression": "the runner passes tool output to the model unchanged",
    "planning": "no scope/two-phase planning in the runner; say it in the system prompt",
    "synthesis": "no separate synthesis model; the root agent writes the answer",
    "server": "a Topology's serve block runs the A2A server (set it per Topology)",
}


def read_workspace(col: Collected, src: Src) -> None:
    f = Fields(col.report, src)
    f.take("apiVersion")
    f.take("kind")
    if "metadata" in f:
        _metadata(col, f.sub("metadata"))
    for key in ("organisation", "team"):
        if key in f:
            sub = f.sub(key)
            ident = sub.take("id")
            sub.take("name")
            sub.finish("id, name")
            if isinstance(ident, str):
                col.workspace_annotations[f"swarmkit.dev/{key}"] = ident
    if "governance" in f:
        _governance(col, f.sub("governance"))
    for key, why in UNSUPPORTED_BLOCKS.items():
        f.unsupported(key, why)
    creds = f.take("credentials")
    if isinstance(creds, dict):
        sub = f.sub("credentials")
        for name in sub.take_all():
            _credential(col, Fields(col.report, sub.src.at(name)), str(name))
    elif creds is not None:
        f.error("credentials", "expected a mapping name → {source, config}")
    providers = f.take("model_providers")
    if isinstance(providers, list):
        for i, _ in enumerate(providers):
            _model_provider(col, Fields(col.report, src.at("model_providers", i)))
    elif providers is not None:
        f.error("model_providers", "expected a list of {class, provider_id, config}")
    servers = f.take("mcp_servers")
    if isinstance(servers, list):
        for i, _ in enumerate(servers):
            sf = Fields(col.report, src.at("mcp_servers", i))
            sid = sf.take("id")
            if not isinstance(sid, str):
                sf.error(None, "an MCP server needs an id")
                continue
            _server(col, sf, sid)
    elif servers is not None:
        f.error("mcp_servers", "expected a list of servers")
    for key, why in (
        ("archetypes", "archetypes are read from their own files"),
        ("topologies", "topologies are read from their own files"),
        ("skills", "skills are read from their own files (pass their directory)"),
    ):
        f.unsupported(key, why)
    f.finish("metadata, organisation, team, governance, credentials, model_providers, mcp_servers")


def _metadata(col: Collected, meta: Fields) -> None:
    ws_id = meta.take("id")
    display = meta.take("name")
    desc = meta.take("description")
    notes = meta.take("annotations")
    meta.finish("id, name, description, annotations")
    if isinstance(desc, str) and desc.strip():
        col.descriptions.append(desc)
    if isinstance(display, str) and display:
        col.workspace_annotations[DISPLAY_NAME_ANNOTATION] = display
    if isinstance(notes, dict):
        for key, value in notes.items():
            name = annotation_key("swarmkit.dev", f"annotation.{key}")
            if name is None:
                meta.sub("annotations").warn(key, "not a valid annotation name; not imported")
            else:
                col.workspace_annotations[name] = str(value)
    if not isinstance(ws_id, str) or not KEBAB_RE.match(ws_id) or len(ws_id) > 63:
        meta.error("id", f"{ws_id!r} must be lowercase-kebab (it names the Workspace)")
        return
    if col.workspace_fixed or ws_id == col.workspace:
        return
    if col.workspace_annotations.get("swarmkit.dev/workspace-id"):
        meta.warn(
            "id",
            f"a second workspace {ws_id!r}: everything is imported into Workspace "
            f"{col.workspace!r} (import each workspace on its own, or pass --workspace)",
        )
        return
    col.workspace = ws_id
    col.secret = f"{ws_id}-credentials"
    col.workspace_annotations["swarmkit.dev/workspace-id"] = ws_id


def _governance(col: Collected, g: Fields) -> None:
    provider = g.take("provider")
    if provider == "custom":
        g.warn(
            "provider",
            "a custom GovernanceProvider cannot run here; the operator's "
            "built-in limits and Reviews apply",
        )
    if "limits" in g:
        lim = g.sub("limits")
        for key, api in (
            ("max_steps_per_agent", "maxStepsPerAgent"),
            ("max_steps_per_run", "maxStepsPerRun"),
        ):
            if key in lim:
                col.governance[api] = lim.take(key)
        lim.unsupported(
            "max_cost_per_run_usd",
            "spend is capped in tokens (governance.maxTokensPerRun), not dollars; set it by hand",
        )
        lim.finish("max_steps_per_agent, max_steps_per_run, max_cost_per_run_usd")
    g.unsupported("config", "it configures SwarmKit's governance provider")
    g.unsupported("policy_language", "policies are RBAC and the operator's configuration")
    g.unsupported(
        "decision_skills",
        "trigger-bound decision skills do not exist here; grant the decision skill to the "
        "agents that must call it",
    )
    g.finish("provider, limits")


def _secret_key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").upper() or "CREDENTIAL"


def credential_name(name: str) -> str:
    """A SwarmKit credential name (``github_pat``) as a Workspace credential name."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _credential(col: Collected, cf: Fields, name: str) -> None:
    source = cf.take("source")
    config = cf.take("config")
    cf.take("provider_id")
    cf.finish("source, config, provider_id")
    if source not in CREDENTIAL_SOURCES:
        cf.error("source", f"{source!r} is not one of {', '.join(CREDENTIAL_SOURCES)}")
        return
    if not isinstance(config, dict):
        cf.error("config", "a credential needs its config (where the value lives)")
        return
    cname = credential_name(name)
    if not KEBAB_RE.match(cname) or len(cname) > 63:
        cf.error(None, f"{name!r} cannot become a credential name (lowercase-kebab)")
        return
    env = config.get("env") if source == "env" else None
    if source == "env":
        if not isinstance(env, str) or not _ENV_RE.match(env):
            cf.error("config", "an env credential needs config.env: the variable's name")
            return
        key = env
        extra = sorted(k for k in config if k != "env")
        if extra:
            cf.sub("config").warn(extra[0], f"unknown field of an env credential: {extra}")
    else:
        key = _secret_key(name)
        where = json.dumps(config, sort_keys=True)
        cf.warn(
            "source",
            f"{source} credential: the operator reads Kubernetes Secrets only; put the value "
            f"from {where} into Secret {col.secret} key {key} (or sync it there with "
            "External Secrets)",
        )
    body = {"name": cname, "secretKeyRef": col.secret_ref(key, cf.src)}
    col.credentials.append(
        Piece(cname, body, cf.src, extra={"key": key, "env": env or key, "source": name})
    )


def _model_provider(col: Collected, pf: Fields) -> None:
    cls = pf.take("class")
    pid = pf.take("provider_id")
    config = pf.sub("config")
    pf.finish("class, provider_id, config")
    if not isinstance(pid, str):
        pf.error("provider_id", "a model provider registration needs a provider_id")
        return
    known = KNOWN_PROVIDERS.get(pid)
    body: dict[str, Any] = {"name": pid, "type": known[0] if known else "openai"}
    base = config.take("base_url") or config.take("api_base") or config.take("endpoint")
    key = config.take("auth_token_env") or config.take("api_key_env")
    if "default_model" in config:
        body["defaultModel"] = config.take("default_model")
    config.finish("base_url, auth_token_env, api_key_env, default_model")
    if base is None and known is not None:
        base = known[1]
    if base is None:
        pf.error(
            "class",
            f"custom provider class {cls!r} cannot run in the runner, and its config has no "
            "base_url of an OpenAI-compatible endpoint to call instead",
        )
        return
    if base is not None:
        body["baseUrl"] = base
    key = key or (known[2] if known else f"{_secret_key(pid)}_API_KEY")
    if key:
        body["apiKey"] = col.secret_ref(str(key), pf.src)
    if known is None:
        pf.warn(
            "class",
            f"custom provider class {cls!r} is not loaded: provider {pid!r} is called as an "
            f"OpenAI-compatible endpoint at {base}",
        )
    if check(col.report, ModelProvider, body, pf.src, f"model provider {pid!r}"):
        col.model_providers[:] = [p for p in col.model_providers if p.name != pid]
        col.model_providers.append(Piece(pid, body, pf.src))


def _server(col: Collected, f: Fields, sid: str) -> None:
    out: dict[str, Any] = {"id": sid}
    transport = f.take("transport")
    if transport is not None:
        out["transport"] = transport
    command = f.take("command")
    if command is not None:
        out["command"] = command
    endpoint = f.take("endpoint")
    if endpoint is not None:
        out["url"] = endpoint
    env: list[dict[str, Any]] = []
    if "env" in f and not isinstance(f.data["env"], dict):
        f.error("env", "expected a mapping NAME: value")
        f.take("env")
    if "env" in f and "env" not in f.taken:
        sub = f.sub("env")
        if transport == "http":
            f.warn("env", "env is passed to stdio servers only (as upstream); not imported")
            sub.take_all()
        else:
            env = [col.env_value(sub, str(k), v) for k, v in sub.take_all().items()]
    f.unsupported("cwd", "stdio servers start in the Run's scratch directory")
    ref = f.take("credentials_ref")
    if ref is not None:
        cred = next((c for c in col.credentials if c.name == credential_name(str(ref))), None)
        if cred is None:
            f.error("credentials_ref", f"{ref!r} is not a credentials entry of this workspace")
        elif transport == "http":
            out["headers"] = [
                {
                    "name": "Authorization",
                    "secretKeyRef": cred.body["secretKeyRef"],
                    "prefix": "Bearer ",
                }
            ]
        elif not any(e["name"] == cred.extra["env"] for e in env):
            env.append({"name": cred.extra["env"], "secretKeyRef": cred.body["secretKeyRef"]})
    if env:
        out["env"] = env
    sandboxed = f.take("sandboxed")
    if sandboxed:
        f.warn("sandboxed", "every Run is its own locked-down pod; no extra sandbox is started")
    f.unsupported("sandbox_image", "stdio servers run in the runner's image")
    if "permission" in f:
        out["permission"] = f.take("permission")
    overrides = f.take("permission_overrides")
    if isinstance(overrides, dict):
        out["toolOverrides"] = [{"tool": str(t), "permission": v} for t, v in overrides.items()]
    f.finish(
        "id, transport, command, endpoint, env, credentials_ref, sandboxed, permission, "
        "permission_overrides"
    )
    if check(col.report, McpServer, out, f.src, f"MCP server {sid!r}", rename={"url": "endpoint"}):
        col.mcp_servers.append(Piece(sid, out, f.src))
