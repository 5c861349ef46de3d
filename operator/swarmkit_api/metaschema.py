"""A JSON Schema checked against the JSON Schema 2020-12 metaschema, every subschema
included (issue 47 item 7): ``{type: banana}`` four levels inside a Skill's ``outputs`` is
found before anything runs, and reported naming its field
(``spec.outputs.properties.a.items.type``), instead of failing every Run at run time when
the runner builds its validator.

The apiserver cannot do this: the schemas are ``x-kubernetes-preserve-unknown-fields``
subtrees and CEL cannot recurse. The operator's models call :func:`schema_problem` (through
:class:`~swarmkit_api.common.JsonSchema`), and the reconcilers report ``Accepted=False
InvalidSchema``.

It is the metaschema's own rules, keyword by keyword, written without recursion (a hostile
schema may nest deep) and without the ``jsonschema`` package (the operator's image does not
carry it; the runner does). ``tests/unit/test_metaschema.py`` checks that it agrees with
``jsonschema.Draft202012Validator.check_schema`` on generated schemas. Like that check, it
compiles ``pattern`` and ``patternProperties`` keys with Python's ``re`` (what the runner
validates with) and does not check URI syntax.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from typing import Any

#: The seven JSON Schema types.
SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_ANCHOR = re.compile(r"^[A-Za-z_][-A-Za-z0-9._]*$")
_ID = re.compile(r"^[^#]*#?$")
_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$-]*$")

#: A subschema to check next: (value, its field path).
Pending = deque[tuple[Any, str]]
#: A keyword's check: the problem with ``value`` (None: fine); subschemas go to ``pending``.
Check = Callable[[Any, str, Pending], str | None]


def _step(path: str, key: str) -> str:
    """``path`` followed by ``key`` (bracketed when it is not a plain identifier)."""
    return f"{path}.{key}" if _IDENT.match(key) else f"{path}[{key!r}]"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    return _is_number(value) and float(value).is_integer()


def _unique(items: list[Any]) -> bool:
    return len({repr(i) for i in items}) == len(items)


def _schema(value: Any, path: str, pending: Pending) -> str | None:
    pending.append((value, path))
    return None


def _schema_map(value: Any, path: str, pending: Pending) -> str | None:
    if not isinstance(value, dict):
        return "must be an object of schemas"
    pending.extend((v, _step(path, str(k))) for k, v in value.items())
    return None


def _pattern_map(value: Any, path: str, pending: Pending) -> str | None:
    if not isinstance(value, dict):
        return "must be an object of schemas"
    for key in value:
        if _regex(key, path, pending) is not None:
            return f"key {key!r} is not a valid regular expression"
    return _schema_map(value, path, pending)


def _schema_list(value: Any, path: str, pending: Pending) -> str | None:
    if not isinstance(value, list) or not value:
        return "must be a non-empty list of schemas"
    pending.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
    return None


def _type(value: Any, path: str, pending: Pending) -> str | None:
    if isinstance(value, str) and value in SIMPLE_TYPES:
        return None
    if (
        isinstance(value, list)
        and value
        and all(isinstance(t, str) and t in SIMPLE_TYPES for t in value)
        and _unique(value)
    ):
        return None
    return f"{value!r} is not a JSON Schema type (one of {', '.join(sorted(SIMPLE_TYPES))})"


def _string(value: Any, path: str, pending: Pending) -> str | None:
    return None if isinstance(value, str) else "must be a string"


def _boolean(value: Any, path: str, pending: Pending) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def _number(value: Any, path: str, pending: Pending) -> str | None:
    return None if _is_number(value) else "must be a number"


def _positive(value: Any, path: str, pending: Pending) -> str | None:
    return None if _is_number(value) and value > 0 else "must be a number above 0"


def _count(value: Any, path: str, pending: Pending) -> str | None:
    return None if _is_integer(value) and value >= 0 else "must be an integer of at least 0"


def _array(value: Any, path: str, pending: Pending) -> str | None:
    return None if isinstance(value, list) else "must be a list"


def _strings(value: Any, path: str, pending: Pending) -> str | None:
    if isinstance(value, list) and all(isinstance(s, str) for s in value) and _unique(value):
        return None
    return "must be a list of distinct strings"


def _strings_map(value: Any, path: str, pending: Pending) -> str | None:
    if not isinstance(value, dict):
        return "must be an object of string lists"
    for key, item in value.items():
        if _strings(item, path, pending) is not None:
            return f"{key!r} must be a list of distinct strings"
    return None


def _dependencies(value: Any, path: str, pending: Pending) -> str | None:
    if not isinstance(value, dict):
        return "must be an object"
    for key, item in value.items():
        if isinstance(item, list):
            if _strings(item, path, pending) is not None:
                return f"{key!r} must be a schema or a list of distinct strings"
        else:
            pending.append((item, _step(path, str(key))))
    return None


def _regex(value: Any, path: str, pending: Pending) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    try:
        re.compile(value)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"is not a valid regular expression ({exc})"
    return None


def _anchor(value: Any, path: str, pending: Pending) -> str | None:
    if isinstance(value, str) and _ANCHOR.match(value):
        return None
    return "must be a name: a letter or '_', then letters, digits, '-', '.', '_'"


def _id(value: Any, path: str, pending: Pending) -> str | None:
    if isinstance(value, str) and _ID.match(value):
        return None
    return "must be a URI reference without a fragment"


def _vocabulary(value: Any, path: str, pending: Pending) -> str | None:
    if isinstance(value, dict) and all(isinstance(v, bool) for v in value.values()):
        return None
    return "must be an object of true/false"


#: Every keyword the 2020-12 metaschema (and its vocabularies) constrains, and how.
KEYWORDS: dict[str, Check] = {
    # core
    "$id": _id,
    "$schema": _string,
    "$ref": _string,
    "$anchor": _anchor,
    "$dynamicRef": _string,
    "$dynamicAnchor": _anchor,
    "$vocabulary": _vocabulary,
    "$comment": _string,
    "$defs": _schema_map,
    # deprecated, still in the 2020-12 metaschema
    "definitions": _schema_map,
    "dependencies": _dependencies,
    "$recursiveAnchor": _anchor,
    "$recursiveRef": _string,
    # applicator
    "prefixItems": _schema_list,
    "items": _schema,
    "contains": _schema,
    "additionalProperties": _schema,
    "properties": _schema_map,
    "patternProperties": _pattern_map,
    "dependentSchemas": _schema_map,
    "propertyNames": _schema,
    "if": _schema,
    "then": _schema,
    "else": _schema,
    "allOf": _schema_list,
    "anyOf": _schema_list,
    "oneOf": _schema_list,
    "not": _schema,
    # unevaluated
    "unevaluatedItems": _schema,
    "unevaluatedProperties": _schema,
    # validation
    "type": _type,
    "enum": _array,
    "multipleOf": _positive,
    "maximum": _number,
    "exclusiveMaximum": _number,
    "minimum": _number,
    "exclusiveMinimum": _number,
    "maxLength": _count,
    "minLength": _count,
    "pattern": _regex,
    "maxItems": _count,
    "minItems": _count,
    "uniqueItems": _boolean,
    "maxContains": _count,
    "minContains": _count,
    "maxProperties": _count,
    "minProperties": _count,
    "required": _strings,
    "dependentRequired": _strings_map,
    # meta-data, format, content
    "title": _string,
    "description": _string,
    "deprecated": _boolean,
    "readOnly": _boolean,
    "writeOnly": _boolean,
    "examples": _array,
    "format": _string,
    "contentEncoding": _string,
    "contentMediaType": _string,
    "contentSchema": _schema,
}


def schema_problem(schema: Any) -> tuple[str, str] | None:
    """The first place ``schema`` breaks the metaschema: (path inside the schema, e.g.
    ``.properties.a.type``, and what is wrong), or None when it is a valid JSON Schema."""
    pending: Pending = deque([(schema, "")])
    while pending:
        node, path = pending.popleft()  # breadth first: the shallowest problem is named
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            return path, "must be a JSON Schema (an object or true/false)"
        for key, value in node.items():
            check = KEYWORDS.get(key)
            problem = check(value, _step(path, key), pending) if check else None
            if problem is not None:
                return _step(path, key), problem
    return None


__all__ = ["KEYWORDS", "SIMPLE_TYPES", "schema_problem"]
