"""HTTP tools (Swarm's ``http`` class): method, URL template, input schema, response mapping.

Arguments are validated against ``inputSchema``; ``{name}`` placeholders in ``http.url``
are filled (URL-encoded) from them; the remaining arguments become the query string (GET,
DELETE) or the JSON body (POST, PUT, PATCH). ``credentials`` adds a header whose value comes
from a Secret; when that Secret key is also a Workspace ``credentials`` entry, the filled
URL's host must be in its ``allowedHosts`` (a placeholder in the host cannot carry it away).
A non-2xx answer is a tool error with the status and a capped body. With a
``responseMapping`` the result is ``{field: value at dotted path}``; otherwise the body.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from swarmkit_api.bundle import BundleAgent
from swarmkit_api.workspace import Tool, credential_refused

from .catalog import EMPTY_OBJECT_SCHEMA, ToolEntry, as_text
from .context import RunContext
from .errors import ToolError
from .output import schema_problems
from .permissions import Gate, Layer, guard

MAX_ERROR_BODY = 1000
MAX_BODY = 256 * 1024
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def dotted(value: Any, path: str) -> Any:
    """The value at ``a.b.0.c`` in decoded JSON (None when absent)."""
    node = value
    for part in (p for p in path.split(".") if p):
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def validate_arguments(schema: dict[str, Any], args: dict[str, Any]) -> None:
    """Raise a ToolError naming the first field that does not match ``schema``."""
    problems = schema_problems(schema, args)
    if problems:
        raise ToolError(problems[0], "InvalidArguments")


def http_gate(tool: Tool) -> Gate:
    """Tier and effects of a Workspace tool (undeclared effects count as write)."""
    layer = Layer(
        f"tool {tool.name}",
        tool.permission,
        approve_hint="Workspace tools have no approval: use open or cautious",
    )
    return Gate(layers=(layer,), effects=tool.effects or "write")


def http_tool(ctx: RunContext, tool: Tool, agent: BundleAgent) -> ToolEntry:
    assert tool.http is not None and tool.http.url is not None
    spec = tool.http
    url_template: str = tool.http.url
    schema = tool.input_schema.as_dict() if tool.input_schema is not None else EMPTY_OBJECT_SCHEMA

    async def call(args: dict[str, Any]) -> str:
        if tool.input_schema is not None:
            validate_arguments(schema, args)
        used: set[str] = set()

        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in args:
                raise ToolError(f"missing argument {name!r} for the URL", "InvalidArguments")
            used.add(name)
            return quote(str(args[name]), safe="")

        url = _PLACEHOLDER.sub(fill, url_template)
        rest = {k: v for k, v in args.items() if k not in used}
        headers = dict(spec.headers)
        if tool.credentials is not None:
            refused = credential_refused(
                ctx.bundle.workspace.credentials, tool.credentials.secret_key_ref, url
            )
            if refused is not None:
                raise ToolError(
                    f"{spec.method} {url}: tool {tool.name}'s credential is Workspace credential "
                    f"{refused!r}, whose allowedHosts does not list this host; not sent",
                    "CredentialNotAllowed",
                )
            value = tool.credentials.prefix + ctx.secrets.get(tool.credentials.secret_key_ref)
            ctx.secrets.remember(value)
            headers[tool.credentials.header] = value
        kwargs: dict[str, Any] = {"headers": headers, "timeout": float(spec.timeout_seconds)}
        if spec.method in ("GET", "DELETE"):
            kwargs["params"] = {
                k: (v if isinstance(v, str | int | float | bool) else json.dumps(v))
                for k, v in rest.items()
            }
        else:
            kwargs["json"] = rest
        import httpx  # imported by ctx.http already; a run without HTTP tools never does

        try:
            response = await ctx.http.request(spec.method, url, **kwargs)
        except httpx.TimeoutException:
            raise ToolError(f"{spec.method} {url} timed out", "HttpTimeout") from None
        except httpx.HTTPError as exc:
            raise ToolError(
                f"{spec.method} {url} failed: {type(exc).__name__}", "HttpError"
            ) from None
        body = response.text[:MAX_BODY]
        if not 200 <= response.status_code < 300:
            raise ToolError(
                f"HTTP {response.status_code} from {spec.method} {url}: {body[:MAX_ERROR_BODY]}",
                "HttpError",
            )
        try:
            data: Any = response.json()
        except ValueError:
            data = None
        if tool.response_mapping:
            if data is None:
                raise ToolError("response is not JSON; cannot apply responseMapping", "HttpError")
            return as_text({k: dotted(data, p) for k, p in tool.response_mapping.items()})
        return as_text(data) if data is not None else body

    gate = http_gate(tool)
    return ToolEntry(
        tool.name, tool.description, schema, "http", guard(agent, gate, call), gate=gate
    )
