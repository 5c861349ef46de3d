"""Swarm ``tools.yaml`` → Workspace tools (upstream ``platform-spec.yaml`` tool_model).

HTTP request templates are translated into what the runner's HTTP executor does, or the
tool is refused with the reason (an error naming the field): ``{{input.x}}`` in the URL →
``{x}``; a header ``[prefix]{{credentials.key}}`` → the tool's Secret-backed credential;
literal headers stay; a body that passes the inputs through unchanged is what the runner
sends anyway; ``{{response.body.a[0].b}}`` → the response-mapping path ``a.0.b``. A tool's
``permission`` that is not a tier names a permission the calling agent must hold; it is
enforced at assembly by granting the tool only to agents that hold it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from swarmkit_api.workspace import Tool

from .collected import Collected, Piece
from .common_map import json_schema
from .mapping import Fields, Src, check, to_camel

TIERS = ("open", "cautious", "strict", "readonly")
EFFECTS = {"read_only": "read", "non_idempotent_write": "write", "idempotent_write": "write"}
_TOKEN = re.compile(r"\{\{\s*([^}]*?)\s*\}\}")
TOOL_FIELDS = (
    "description, handler_type, input_schema, output_schema, http, response_mapping, "
    "response_success, credentials, permission, effect_class, category"
)


class Refused(Exception):
    """A template the runner cannot reproduce; the message says why."""


def _url(template: str) -> str:
    if _TOKEN.fullmatch(template.strip()):
        raise Refused(
            "a URL chosen entirely at call time is not supported; write the fixed "
            "https:// URL with {{input.x}} only in its path or query"
        )

    def sub(m: re.Match[str]) -> str:
        var = m.group(1)
        if var.startswith("input.") and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var[6:]):
            return "{" + var[6:] + "}"
        if var.startswith("credentials."):
            raise Refused(
                f"{{{{{var}}}}} in the URL would put a secret in it; send it in a header instead"
            )
        raise Refused(
            f"{{{{{var}}}}}: only {{{{input.<field>}}}} can be filled into the URL "
            "(policy variables are not imported); write the value"
        )

    out = _TOKEN.sub(sub, template)
    if not re.match(r"^https?://", out):
        raise Refused(f"{template!r} is not an http(s) URL")
    return out


def _headers(
    col: Collected, f: Fields, headers: dict[str, Any]
) -> tuple[dict[str, str], dict[str, Any] | None]:
    literal: dict[str, str] = {}
    cred: dict[str, Any] | None = None
    for name, value in headers.items():
        text = str(value)
        tokens = list(_TOKEN.finditer(text))
        if not tokens:
            literal[str(name)] = text
            continue
        m = tokens[0]
        var = m.group(1)
        if len(tokens) > 1 or m.end() != len(text) or not var.startswith("credentials."):
            raise Refused(
                f"header {name}: only a literal or [prefix]{{{{credentials.<key>}}}} "
                f"can be sent (got {text!r})"
            )
        if cred is not None:
            raise Refused("the runner sends one credential header per tool; this one has two")
        key = var.split(".", 1)[1]
        cred = {
            "secretKeyRef": col.secret_ref(key, f.src.at("http", "headers", name)),
            "header": str(name),
            "prefix": text[: m.start()],
        }
    return literal, cred


def _body(body: Any, inputs: set[str] | None, in_url: set[str]) -> None:
    """The runner sends every input not used in the URL as the JSON body; refuse others."""
    if not isinstance(body, dict):
        raise Refused("the body must be a mapping of fields to {{input.<field>}}")
    for key, value in body.items():
        if value != f"{{{{input.{key}}}}}" and value != f"{{{{ input.{key} }}}}":
            raise Refused(
                f"body field {key!r}: the runner sends the inputs under their own "
                f"names; {value!r} cannot be reproduced"
            )
    if inputs is not None and set(body) != inputs - in_url:
        raise Refused(
            f"the body sends {sorted(body)} but the runner sends every input not in "
            f"the URL ({sorted(inputs - in_url)})"
        )


def _mapping(mapping: dict[str, Any]) -> dict[str, str]:
    out = {}
    for key, value in mapping.items():
        m = _TOKEN.fullmatch(str(value).strip())
        var = m.group(1) if m else ""
        if not (var == "response.body" or var.startswith("response.body.")):
            raise Refused(
                f"response_mapping {key}: only {{{{response.body...}}}} paths can be "
                f"mapped (got {value!r})"
            )
        path = re.sub(r"\[(\d+)\]", r".\1", var[len("response.body") :]).lstrip(".")
        out[str(key)] = path
    return out


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
    if handler in ("api_call", "workflow_registered"):
        f.error(
            "handler_type",
            f"{handler} is retired upstream (rejected at admission): use "
            "handler_type http with an http block, or an MCP server",
        )
        f.take_all()
        return
    if handler is not None:
        body["handlerType"] = handler
    retired = [k for k in ("parameters", "returns", "required_permission") if k in f]
    if retired:
        # Swarm rejects these at load ("RETIRED: tool field ... is not accepted")
        use = {"parameters": "input_schema", "returns": "output_schema"}
        for key in retired:
            f.error(key, f"retired upstream (Swarm refuses it): use {use.get(key, 'permission')}")
        f.take_all()
        return
    for key in ("input_schema", "output_schema"):
        schema = json_schema(f, key)
        if schema is not None:
            body[to_camel(key)] = schema
    extra: dict[str, Any] = {}
    try:
        _http(col, f, body)
    except Refused as exc:
        f.error("http", f"tool {name!r} not imported: {exc}")
        f.take_all()
        return
    permission = f.take("permission")
    if permission in TIERS:
        body["permission"] = permission
    elif isinstance(permission, str):
        extra["requires_permission"] = permission
    effect = f.take("effect_class")
    if effect in EFFECTS:
        body["effects"] = EFFECTS[effect]
    elif effect is not None:
        f.warn("effect_class", f"{effect!r}: imported without declared effects (counted as write)")
    f.unsupported("category", "provider connectors are ordinary http tools here")
    f.unsupported(
        "managed_credential",
        "OAuth token lifecycles are not managed; use a static credential in a header",
    )
    for key in ("rate_limit", "rate_limit_max_wait"):
        f.unsupported(key, "calls are not rate-limited by the runner")
    # Not accepted by Swarm either; kept so the model's own rule rejects them with its hint.
    for key in ("endpoint", "type"):
        if key in f:
            body[key] = f.take(key)
    f.finish(TOOL_FIELDS)
    if check(
        col.report,
        Tool,
        body,
        f.src,
        f"tool {name!r}",
        rename={"inputSchema": "input_schema", "outputSchema": "output_schema"},
    ):
        extra["scope"] = str(_scope(f))
        col.tools.append(Piece(name, body, f.src, extra=extra))


def _scope(f: Fields) -> str:
    return Path(f.src.file).parent.as_posix()


def _http(col: Collected, f: Fields, body: dict[str, Any]) -> None:
    inputs = None
    schema = body.get("inputSchema")
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        inputs = set(schema["properties"])
    if "http" in f:
        h = f.sub("http")
        http: dict[str, Any] = {}
        method = h.take("method")
        if isinstance(method, str):
            http["method"] = method.upper()
        url = h.take("url")
        in_url: set[str] = set()
        if isinstance(url, str):
            http["url"] = _url(url)
            in_url = set(re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", http["url"]))
        if "headers" in h:
            literal, cred = _headers(col, f, h.take("headers") or {})
            if literal:
                http["headers"] = literal
            if cred is not None:
                body["credentials"] = cred
        if "body" in h:
            _body(h.take("body"), inputs, in_url)
        if "timeout_seconds" in h:
            http["timeoutSeconds"] = h.take("timeout_seconds")
        h.finish("method, url, headers, body, timeout_seconds")
        body["http"] = http
    if "response_mapping" in f:
        body["responseMapping"] = _mapping(f.take("response_mapping") or {})
    if "response_success" in f:
        rs = f.take("response_success")
        if not (isinstance(rs, dict) and rs.get("kind") == "http_status_2xx"):
            raise Refused(
                "response_success other than http_status_2xx cannot be checked by the "
                "runner (it fails every non-2xx answer, nothing more)"
            )
    creds = f.take("credentials")
    if creds is not None and not isinstance(creds, list):
        raise Refused("credentials must be a list of credential store keys")
    used = body.get("credentials", {}).get("secretKeyRef", {}).get("key")
    for key in creds or []:
        if key != used:
            f.warn(
                "credentials", f"credential {key!r} is not used in a header template; not imported"
            )
