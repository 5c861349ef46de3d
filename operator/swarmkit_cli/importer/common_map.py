"""Mapping pieces shared by the three source formats: models, MCP servers, JSON Schemas."""

from __future__ import annotations

import re
from typing import Any

from .collected import Collected, Piece
from .mapping import Fields, to_camel

#: Shorthand type names (Swarm's ``input_schema: {query: text}``) → JSON Schema types.
SHORTHAND_TYPES = {
    "text": "string",
    "string": "string",
    "str": "string",
    "integer": "integer",
    "int": "integer",
    "number": "number",
    "float": "number",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "object": "object",
    "dict": "object",
}
#: Providers SwarmKit and Swarm register on their own: name → (our type, base URL, API key
#: Secret key). The OpenAI-compatible aggregators are called at their upstream base URLs.
KNOWN_PROVIDERS: dict[str, tuple[str, str | None, str]] = {
    "anthropic": ("anthropic", None, "ANTHROPIC_API_KEY"),
    "openai": ("openai", None, "OPENAI_API_KEY"),
    "openrouter": ("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "groq": ("openai", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "together": ("openai", "https://api.together.xyz/v1", "TOGETHER_API_KEY"),
    "google": (
        "openai",
        "https://generativelanguage.googleapis.com/v1beta/openai/",
        "GOOGLE_API_KEY",
    ),
}
PROVIDER_KEYS = {name: known[2] for name, known in KNOWN_PROVIDERS.items()}


def json_schema(fields: Fields, key: str) -> dict[str, Any] | None:
    """A JSON Schema as-is, or Swarm's shorthand ``{name: type}`` turned into one."""
    value = fields.take(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        fields.error(key, f"expected a mapping (JSON Schema), got {type(value).__name__}")
        return None
    if "type" in value or "properties" in value or "$ref" in value:
        return value
    props: dict[str, Any] = {}
    sub = fields.sub(key)
    for name, tname in value.items():
        jtype = SHORTHAND_TYPES.get(str(tname).lower()) if isinstance(tname, str) else None
        if jtype is None:
            sub.warn(name, f"unknown type {tname!r}; imported as a property of any type")
            props[name] = {}
        else:
            props[name] = {"type": jtype}
    return {"type": "object", "properties": props}


def model_selection(col: Collected, fields: Fields, key: str = "model") -> dict[str, Any] | None:
    """``provider/model`` or ``{provider, name, max_tokens, temperature}`` → ModelSelection.

    A provider of a known type (anthropic, openai) that the sources did not declare becomes
    a Workspace model provider with its API key in the generated Secret.
    """
    value = fields.take(key)
    if value is None:
        return None
    out: dict[str, Any] = {}
    if isinstance(value, str):
        provider, _, name = value.partition("/")
        if not name:
            provider, name = "", provider
        if provider:
            out["provider"] = provider
        out["name"] = name
    elif isinstance(value, dict):
        sub = fields.sub(key)
        for k in ("provider", "name", "max_tokens", "temperature"):
            if k in sub:
                out[to_camel(k)] = sub.take(k)
        for k in ("provider", "name"):
            if isinstance(out.get(k), str) and "${" in out[k]:
                resolved = _expand_default(col, sub, k, out[k])
                if resolved is None:
                    return None
                out[k] = resolved
        for k in ("tool_provider", "tool_model"):
            sub.unsupported(k, "one model serves every turn of an agent")
        sub.unsupported("options", "provider-native options are not passed through")
        sub.finish("provider, name, max_tokens, temperature")
    else:
        fields.error(key, f"expected 'provider/model' or a mapping, got {type(value).__name__}")
        return None
    chosen = out.get("provider")
    if isinstance(chosen, str):
        ensure_provider(col, chosen, fields.src.at(key))
    return out


_DEFAULTED = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*):?-([^}]*)\}$")


def _expand_default(col: Collected, f: Fields, key: str, text: str) -> str | None:
    """SwarmKit expands ``${VAR:-default}`` in model fields from its process environment;
    the import takes the default (said once per expression), or refuses a bare ``${VAR}``."""
    m = _DEFAULTED.match(text)
    if m is None:
        f.error(
            key,
            f"{text!r} is chosen from the environment at run time; name the model's "
            f"{key} here (a ${{VAR:-default}} takes its default)",
        )
        return None
    if text not in col.expanded:
        col.expanded.add(text)
        f.warn(
            key,
            f"{text!r} imported as its default {m.group(2)!r} (what SwarmKit uses when "
            f"{m.group(1)} is unset; said once for every place it appears)",
        )
    return m.group(2)


def ensure_provider(col: Collected, provider: str, src: Any) -> None:
    """Declare ``provider`` in the Workspace when it is one upstream registers on its own."""
    if any(p.name == provider for p in col.model_providers):
        return
    known = KNOWN_PROVIDERS.get(provider)
    if known is None:
        return
    body: dict[str, Any] = {"name": provider, "type": known[0]}
    if known[1] is not None:
        body["baseUrl"] = known[1]
    body["apiKey"] = col.secret_ref(known[2], src)
    col.model_providers.append(Piece(provider, body, src))


def mcp_server(col: Collected, fields: Fields, server_id: str) -> dict[str, Any]:
    """The fields both SwarmKit and Swarm MCP server entries share."""
    out: dict[str, Any] = {"id": server_id}
    transport = fields.take("transport")
    if transport in ("streamable_http", "streamable-http", "sse"):
        fields.warn("transport", f"{transport!r} imported as 'http' (streamable HTTP)")
        transport = "http"
    if transport is None:
        transport = "stdio" if "command" in fields else "http" if "url" in fields else None
    if transport is not None:
        out["transport"] = transport
    command = fields.take("command")
    args = fields.take("args")
    if isinstance(command, str):
        command = [command]
    if command is not None:
        out["command"] = list(command) + (list(args) if isinstance(args, list) else [])
    elif args is not None:
        fields.warn("args", "args without command; not imported")
    for key in ("url", "prefix", "permission", "timeout_seconds", "retries"):
        if key in fields:
            out[to_camel(key)] = fields.take(key)
    env = fields.take("env")
    if isinstance(env, dict):
        sub = fields.sub("env")
        out["env"] = [col.env_value(sub, str(k), v) for k, v in sub.take_all().items()]
    elif env is not None:
        fields.error("env", "expected a mapping NAME: value")
    headers = fields.take("headers")
    if isinstance(headers, dict):
        sub = fields.sub("headers")
        hs = []
        for hname, hval in sub.take_all().items():
            text = str(hval)
            var = None
            prefix = ""
            idx = text.find("$")
            if idx >= 0:
                prefix, var = text[:idx], col.secret_var(text[idx:])
            if var is None:
                sub.warn(
                    hname,
                    "only headers whose value is [prefix]${VAR} can be imported (a Secret "
                    "reference); literal header not imported",
                )
                continue
            hs.append(
                {
                    "name": hname,
                    "secretKeyRef": col.secret_ref(var, sub.src.at(hname)),
                    "prefix": prefix,
                }
            )
        out["headers"] = hs
    return out
