"""A local stand-in for apiserver admission of custom resources, for unit tests.

Validates an object against a generated CRD's ``openAPIV3Schema`` with a real OpenAPI 3.0
validator, rejects unknown fields as strict field validation does, and evaluates every
``x-kubernetes-validations`` CEL rule with a real CEL interpreter. Errors carry the same
field paths the apiserver prints (``spec.files[0].path``). The real apiserver is exercised
by the integration tests; this keeps the corpus fast to iterate on.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

import celpy
from celpy import celtypes
from openapi_schema_validator import OAS30Validator


def format_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@cache
def _program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def _cel_errors(schema: dict[str, Any], value: Any, path: list[Any]) -> list[tuple[str, str]]:
    errors: list[tuple[str, str]] = []
    for entry in schema.get("x-kubernetes-validations", []):
        if "oldSelf" in entry["rule"]:
            continue  # a transition rule: the apiserver runs it on updates only
        result = _program(entry["rule"]).evaluate({"self": celpy.json_to_cel(value)})
        if not (isinstance(result, celtypes.BoolType) and bool(result)):
            errors.append((format_path(path) + entry.get("fieldPath", ""), entry["message"]))
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is not None:
            for key, sub in value.items():
                if key in props:
                    errors += _cel_errors(props[key], sub, [*path, key])
                elif not schema.get("x-kubernetes-preserve-unknown-fields") and path != [
                    "metadata"
                ]:
                    errors.append((format_path([*path, key]), f'unknown field "{key}"'))
        elif isinstance(schema.get("additionalProperties"), dict):
            for key, sub in value.items():
                errors += _cel_errors(schema["additionalProperties"], sub, [*path, key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, sub in enumerate(value):
            errors += _cel_errors(schema["items"], sub, [*path, i])
    return errors


def validate(crd: dict[str, Any], obj: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, message) for every problem; empty when the object would be admitted."""
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    errors: list[tuple[str, str]] = []
    for err in OAS30Validator(schema).iter_errors(obj):
        parts = list(err.absolute_path)
        if err.validator == "required":
            missing = err.message.split("'")[1]
            parts.append(missing)
        errors.append((format_path(parts), err.message))
    if not errors:  # the apiserver runs CEL only on schema-valid objects
        errors += _cel_errors(schema, obj, [])
    return errors
