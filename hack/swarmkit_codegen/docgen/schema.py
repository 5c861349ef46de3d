"""Flatten a pydantic model's JSON Schema into reference rows (one per field path).

Both the CRD reference and the Helm values reference (and the chart README) are tables of
the same shape: path, type, default, validation, description. This module walks the
model's *validation* JSON Schema (the one that still carries pydantic's ``default``s, which
the structural CRD schema drops on purpose) and resolves ``$ref``/nullable branches the way
``crdgen`` does, so a row says what the apiserver and the operator accept.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

# Keys of a schema node that constrain a value, in the order the reference lists them.
_CONSTRAINTS = (
    ("minLength", "min length {}"),
    ("maxLength", "max length {}"),
    ("minimum", "≥ {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "≤ {}"),
    ("exclusiveMaximum", "< {}"),
    ("minItems", "min items {}"),
    ("maxItems", "max items {}"),
    ("minProperties", "min entries {}"),
    ("maxProperties", "max entries {}"),
    ("format", "format {}"),
)


@dataclass(frozen=True)
class Row:
    """One documented field."""

    path: str
    type: str
    required: bool
    default: str
    validation: tuple[str, ...]
    description: str


_ENTITIES = str.maketrans({c: f"&#{ord(c)};" for c in "|[]()*_\\`<>{}"})


def code(value: str) -> str:
    """``value`` as inline code that survives a Markdown table cell (pipes, backticks)."""
    # Markdown still parses inline syntax inside <code>: every character it could read as
    # a link, emphasis, escape or code span becomes an entity.
    escaped = html.escape(value, quote=False).translate(_ENTITIES)
    return "<code>" + escaped + "</code>"


def cell(text: str) -> str:
    """Plain text made safe for one Markdown table cell."""
    parts = " ".join(text.split()).split("`")
    # Outside code spans '<' would open an HTML tag (``<64 hex>``); inside, Markdown escapes.
    parts[::2] = [html.escape(p, quote=False) for p in parts[::2]]
    return "`".join(parts).replace("|", "\\|")


def _deref(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Merge ``$ref``, a single ``allOf`` and nullable ``anyOf`` into one node."""
    while True:
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            rest = {k: v for k, v in node.items() if k != "$ref"}
            # The field's own description/default win over the referenced model's docstring.
            node = {**target, **rest}
        elif "allOf" in node and len(node["allOf"]) == 1:
            rest = {k: v for k, v in node.items() if k != "allOf"}
            node = {**node["allOf"][0], **rest}
        elif "anyOf" in node:
            branches = [b for b in node["anyOf"] if b.get("type") != "null"]
            if len(branches) != 1:
                return node
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            node = {**branches[0], **rest, "nullable": True}
        else:
            return node


def _type_name(node: dict[str, Any], defs: dict[str, Any]) -> str:
    node = _deref(node, defs)
    if "anyOf" in node or "oneOf" in node:
        branches = node.get("anyOf") or node.get("oneOf") or []
        names = [_type_name(b, defs) for b in branches if b.get("type") != "null"]
        return " or ".join(dict.fromkeys(names))
    if "const" in node:
        return "string"
    kind = node.get("type")
    if kind == "array":
        return f"[]{_type_name(node.get('items', {}), defs)}"
    if kind == "object" or "properties" in node:
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return f"map[string]{_type_name(extra, defs)}"
        return "object"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind if k != "null")
    if kind is None and "enum" in node:
        return "string"
    return str(kind or "any")


def _validation(node: dict[str, Any]) -> tuple[str, ...]:
    out: list[str] = []
    if "enum" in node:
        out.append("one of " + ", ".join(code(_literal(v)) for v in node["enum"]))
    if "const" in node:
        out.append("exactly " + code(_literal(node["const"])))
    if "pattern" in node:
        out.append("pattern " + code(node["pattern"]))
    for key, text in _CONSTRAINTS:
        if key in node:
            out.append(text.format(node[key]))
    if node.get("uniqueItems"):
        out.append("unique items")
    for rule in node.get("x-kubernetes-validations", []):
        out.append(f"CEL {code(rule['rule'])}: {cell(rule['message'])}")
    return tuple(out)


def _literal(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _default(node: dict[str, Any], required: bool) -> str:
    if "default" in node:
        return code(json.dumps(node["default"], sort_keys=True))
    return "required" if required else ""


def rows(schema: dict[str, Any], prefix: str) -> list[Row]:
    """Every field under ``schema`` (a model's JSON Schema), depth first, sorted as declared."""
    defs = schema.get("$defs", {})
    out: list[Row] = []
    _walk(_deref(schema, defs), prefix, defs, out, seen=())
    return out


def _walk(
    node: dict[str, Any],
    path: str,
    defs: dict[str, Any],
    out: list[Row],
    seen: tuple[str, ...],
) -> None:
    required = set(node.get("required", ()))
    for name, raw in node.get("properties", {}).items():
        ref = raw.get("$ref", "")
        field = _deref(raw, defs)
        child = f"{path}.{name}"
        out.append(
            Row(
                path=child,
                type=_type_name(raw, defs),
                required=name in required,
                default=_default(field, name in required),
                validation=_validation(field),
                description=cell(field.get("description", "")),
            )
        )
        if ref and ref in seen:
            continue  # a recursive model (a composed step holding steps): documented once
        _descend(field, child, defs, out, (*seen, ref) if ref else seen)


def _descend(
    field: dict[str, Any], path: str, defs: dict[str, Any], out: list[Row], seen: tuple[str, ...]
) -> None:
    if "properties" in field:
        _walk(field, path, defs, out, seen)
    elif field.get("type") == "array":
        items = field.get("items", {})
        ref = items.get("$ref", "")
        if ref not in seen:
            _descend(_deref(items, defs), f"{path}[]", defs, out, (*seen, ref) if ref else seen)
    elif isinstance(field.get("additionalProperties"), dict):
        extra = field["additionalProperties"]
        ref = extra.get("$ref", "")
        if ref not in seen:
            _descend(_deref(extra, defs), f"{path}.*", defs, out, (*seen, ref) if ref else seen)


def table(rows_: list[Row]) -> str:
    """The Markdown table of ``rows_``."""
    lines = [
        "| Field | Type | Default | Validation | Description |",
        "|---|---|---|---|---|",
    ]
    for r in rows_:
        lines.append(
            f"| {code(r.path)} | {cell(r.type)} | {r.default} | "
            f"{'<br>'.join(r.validation)} | {r.description} |"
        )
    return "\n".join(lines) + "\n"
