"""Embedded JSON Schemas are checked against the 2020-12 metaschema, nested subschemas
included (issue 47 item 7): the operator's own checker (no ``jsonschema`` in its image)
agrees with ``jsonschema.Draft202012Validator.check_schema`` on generated schemas, and a
schema broken deep inside a Skill, a command, an Agent or a Funnel is ``Accepted=False
InvalidSchema`` naming the nested field."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swarmkit_api.conditions import REASON_INVALID_SCHEMA, REASON_VALID
from swarmkit_api.metaschema import KEYWORDS, SIMPLE_TYPES, schema_problem
from swarmkit_operator.builders import ObjectRef
from swarmkit_operator.builders.funnel import funnel_status
from swarmkit_operator.builders.skill import render_skill
from swarmkit_operator.builders.workspace import render_workspace
from swarmkit_operator.config import OperatorConfig
from tests.schema.corpus import funnel, skill, workspace

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, 1.5, -2.0]),
    st.sampled_from(["", "a", "string", "banana", "^a+$", "(", "[a-", "#x", "a#b", "_x"]),
    st.sampled_from(sorted(SIMPLE_TYPES)),
)


def _schemas() -> st.SearchStrategy[Any]:
    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        values = st.one_of(
            SCALARS,
            children,
            st.lists(st.one_of(SCALARS, children), max_size=3),
            st.dictionaries(st.sampled_from(["a", "b", "^x", "(", "c d"]), children, max_size=3),
        )
        keys = st.sampled_from([*sorted(KEYWORDS), "x-custom", "nullable"])
        return st.dictionaries(keys, values, max_size=4)

    return st.recursive(st.one_of(st.booleans(), st.just({})), extend, max_leaves=12)


def _jsonschema_accepts(schema: Any) -> bool:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return True


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas())
def test_agrees_with_jsonschema_check_schema(schema: Any) -> None:
    assert (schema_problem(schema) is None) == _jsonschema_accepts(schema), schema


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "banana"},
        {"properties": {"a": {"properties": {"b": {"items": {"type": "banana"}}}}}},
        {"type": ["string", "string"]},
        {"type": []},
        {"required": ["a", "a"]},
        {"minLength": -1},
        {"minLength": 1.5},
        {"multipleOf": 0},
        {"pattern": "("},
        {"patternProperties": {"(": {}}},
        {"allOf": []},
        {"anyOf": [{"type": 3}]},
        {"items": 3},
        {"$defs": {"x": {"enum": "a"}}},
        {"$anchor": "1x"},
        {"$id": "a#b"},
    ],
)
def test_invalid_schemas_are_refused_like_jsonschema_refuses_them(schema: Any) -> None:
    assert schema_problem(schema) is not None
    assert not _jsonschema_accepts(schema)


def test_the_problem_names_the_deepest_field_exactly() -> None:
    schema = {"properties": {"a": {"items": {"properties": {"b c": {"type": "banana"}}}}}}
    where, what = schema_problem(schema) or ("", "")
    assert where == ".properties.a.items.properties['b c'].type"
    assert "'banana' is not a JSON Schema type" in what


DEEP = {
    "type": "object",
    "properties": {
        "a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "banana"}}}}
    },
}
DEEP_PATH = ".properties.a.items.properties.b.type"
CONFIG = OperatorConfig()
REASONING = {"type": "object", "properties": {"confidence": {"type": "number"}}}


def _accepted(verdicts: Any) -> Any:
    return next(v for v in verdicts if v.type == "Accepted")


@pytest.mark.parametrize("field", ["outputs", "inputs"])
def test_a_skill_with_a_nested_invalid_schema_is_invalid_schema(field: str) -> None:
    spec = skill(category="decision", **{field: DEEP})["spec"]
    render = render_skill(ObjectRef("Skill", "s", "ns", "u"), spec, {}, CONFIG)
    accepted = _accepted(render.verdicts)
    assert (accepted.status, accepted.reason) == ("False", REASON_INVALID_SCHEMA)
    assert f"spec.{field}{DEEP_PATH}: not a valid JSON Schema" in accepted.message
    assert render.config_map is None


def test_a_command_with_a_nested_invalid_input_schema_is_invalid_schema() -> None:
    command = {"name": "count", "description": "Count.", "argv": ["wc"], "inputs": DEEP}
    pack = {"id": "tools", "description": "Tools.", "commands": [command]}
    spec = workspace(commandPacks=[pack])["spec"]
    render = render_workspace(ObjectRef("Workspace", "w", "ns", "u"), spec, {})
    accepted = _accepted(render.verdicts)
    assert (accepted.status, accepted.reason) == ("False", REASON_INVALID_SCHEMA), accepted
    assert f"commandPacks[0].commands[0].inputs{DEEP_PATH}" in accepted.message


def test_a_funnel_with_a_nested_invalid_validate_schema_is_invalid_schema() -> None:
    spec = funnel(validate={"schema": DEEP})["spec"]
    status = funnel_status(spec, lambda _: True)
    accepted, ready = status.verdicts
    assert (accepted.status, accepted.reason) == ("False", REASON_INVALID_SCHEMA)
    assert (ready.status, ready.reason) == ("False", REASON_INVALID_SCHEMA)
    assert f"spec.validate.schema{DEEP_PATH}" in accepted.message


def test_a_valid_nested_schema_is_accepted() -> None:
    ok = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}}},
        "required": ["a"],
    }
    status = funnel_status(funnel(validate={"schema": ok})["spec"], lambda _: True)
    assert [v.reason for v in status.verdicts] == [REASON_VALID, REASON_VALID]
