"""values.yaml, the values model (chart_values.py) and values.schema.json agree, and bad values
are rejected with a message naming the key, by the schema, by pydantic and by helm itself."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from pydantic import BaseModel, ValidationError

from swarmkit_codegen import chart_values
from swarmkit_codegen.chart_values import ChartValues
from swarmkit_operator.config import ConfigError, parse_config
from tests.unit.test_chart_render import PIN, render_error

REPO = Path(__file__).resolve().parents[2]
VALUES_FILE = REPO / chart_values.CHART_DIR / "values.yaml"
SCHEMA_FILE = REPO / chart_values.SCHEMA_PATH


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    data = yaml.safe_load(VALUES_FILE.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def merged(values: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """What Helm validates: values.yaml with the user's values merged over it."""
    out = copy.deepcopy(values)

    def merge(dst: dict[str, Any], src: dict[str, Any]) -> None:
        for key, value in src.items():
            if isinstance(value, dict) and isinstance(dst.get(key), dict):
                merge(dst[key], value)
            else:
                dst[key] = value

    merge(out, override)
    return out


def test_schema_file_is_generated_from_the_model() -> None:
    assert chart_values.render()[chart_values.SCHEMA_PATH] == SCHEMA_FILE.read_text(), (
        "values.schema.json is stale; run `make generate`"
    )


def test_values_yaml_equals_the_model_defaults(values: dict[str, Any]) -> None:
    model = ChartValues.model_validate(values)
    dumped = model.model_dump(by_alias=True, mode="json")
    dumped.pop("global")
    assert dumped == values


def test_values_yaml_passes_the_schema(
    values: dict[str, Any], validator: Draft202012Validator
) -> None:
    assert [e.message for e in validator.iter_errors(values)] == []


def _model_keys(model: type[BaseModel], node: yaml.MappingNode, lines: list[str]) -> list[str]:
    """Keys of ``node`` that are fields of ``model`` without a comment line right above."""
    missing: list[str] = []
    fields = {f.alias or name: f for name, f in model.model_fields.items()}
    for key_node, value_node in node.value:
        key = key_node.value
        line = key_node.start_mark.line
        if not lines[line - 1].strip().startswith("#"):
            missing.append(f"{key} (line {line + 1})")
        annotation = fields[key].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            assert isinstance(value_node, yaml.MappingNode), key
            missing += [f"{key}.{m}" for m in _model_keys(annotation, value_node, lines)]
    return missing


def test_every_key_in_values_yaml_has_a_comment() -> None:
    text = VALUES_FILE.read_text()
    root = yaml.compose(text)
    assert isinstance(root, yaml.MappingNode)
    assert _model_keys(ChartValues, root, text.splitlines()) == []


# Bad values: (override, the key path helm names, what the message says).
BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"replicaCount": 0}, "/replicaCount", "minimum"),
    ({"replicas": 2}, "additional properties 'replicas'", "not allowed"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy", "Always"),
    ({"image": {"digest": "sha256:xyz"}}, "/image/digest", "does not match"),
    ({"crds": {"keep": "yes"}}, "/crds/keep", "boolean"),
    ({"watchNamespaces": ["Team_A"]}, "/watchNamespaces/0", "does not match"),
    ({"watchNamespaces": ["a", "a"]}, "/watchNamespaces", "are equal"),
    ({"metrics": {"port": 80}}, "/metrics/port", "minimum"),
    ({"logging": {"format": "text"}}, "/logging/format", "json"),
    ({"config": {"maxJobRecreations": -1}}, "/config/maxJobRecreations", "minimum"),
    (
        {"config": {"security": {"skills": {"allowed": [{"skill": "x", "path": "a.py"}]}}}},
        "/config/security/skills/allowed/0",
        "sha256",
    ),
    (
        {
            "config": {
                "security": {
                    "skills": {"allowed": [{"skill": "x", "path": "a.py", "sha256": "abc"}]}
                }
            }
        },
        "/config/security/skills/allowed/0/sha256",
        "does not match",
    ),
    (
        {
            "config": {
                "security": {
                    "skills": {"allowed": [{"skill": "x", "path": "../etc/x", "sha256": PIN}]}
                }
            }
        },
        "/config/security/skills/allowed/0/path",
        "failed",
    ),
    (
        {
            "config": {
                "security": {
                    "skills": {"allowed": [{"skill": "Bad_Name", "path": "a.py", "sha256": PIN}]}
                }
            }
        },
        "/config/security/skills/allowed/0/skill",
        "does not match",
    ),
    (
        {"config": {"security": {"skills": {"allowScriptExecution": "true"}}}},
        "/config/security/skills/allowScriptExecution",
        "boolean",
    ),
]

# Wrong only in combination: the chart's templates fail with a message naming the keys.
BAD_COMBINATIONS: list[tuple[dict[str, Any], str]] = [
    ({"metrics": {"port": 8080}}, "metrics.port and health.port must differ"),
    (
        {"podDisruptionBudget": {"enabled": True, "minAvailable": 1, "maxUnavailable": 1}},
        "set only one of minAvailable or maxUnavailable",
    ),
    (
        {"serviceAccount": {"create": False}},
        "serviceAccount.name is required when serviceAccount.create is false",
    ),
]


@pytest.mark.parametrize(("override", "where", "what"), BAD, ids=[b[1] for b in BAD])
def test_bad_values_rejected_by_schema_model_and_helm(
    override: dict[str, Any],
    where: str,
    what: str,
    values: dict[str, Any],
    validator: Draft202012Validator,
) -> None:
    data = merged(values, override)
    assert list(validator.iter_errors(data)), "the schema accepted it"
    with pytest.raises(ValidationError):
        ChartValues.model_validate(data)
    stderr = render_error(override)
    assert "values don't meet the specifications of the schema" in stderr
    assert where in stderr and what in stderr, stderr


@pytest.mark.parametrize(("override", "message"), BAD_COMBINATIONS)
def test_bad_combinations_rejected_by_helm_and_model(
    override: dict[str, Any], message: str, values: dict[str, Any]
) -> None:
    assert message in render_error(override)
    if "serviceAccount" not in override:  # the model leaves that one to the template
        with pytest.raises(ValidationError):
            ChartValues.model_validate(merged(values, override))


GOOD: list[dict[str, Any]] = [
    {"replicaCount": 3, "watchNamespaces": ["team-a", "b"]},
    {"image": {"tag": "v1.2.3-rc.1", "digest": "sha256:" + "0" * 64}},
    {"podDisruptionBudget": {"enabled": True, "minAvailable": "50%", "maxUnavailable": ""}},
    {
        "config": {
            "security": {
                "skills": {
                    "allowScriptExecution": True,
                    "allowed": [
                        {"skill": "a", "path": "scripts/x.py", "sha256": PIN},
                        {"namespace": "team-a", "skill": "b", "path": "run.sh", "sha256": PIN},
                    ],
                }
            },
            "maxJobRecreations": 0,
        }
    },
    {"global": {"imageRegistry": "mirror.local"}},
]


@pytest.mark.parametrize("override", GOOD)
def test_good_values_accepted_by_schema_and_model(
    override: dict[str, Any], values: dict[str, Any], validator: Draft202012Validator
) -> None:
    data = merged(values, override)
    assert [e.message for e in validator.iter_errors(data)] == []
    ChartValues.model_validate(data)


def _operator_file(config: dict[str, Any]) -> dict[str, Any]:
    """The config file the chart renders from a values `config` section (see _helpers.tpl)."""
    skills = config["security"]["skills"]
    return {
        "security": {
            "skills": {
                "allowScriptExecution": skills["allowScriptExecution"],
                "allowed": [{k: v for k, v in e.items() if v} for e in skills.get("allowed", [])],
            }
        },
        "maxJobRecreations": config["maxJobRecreations"],
    }


@pytest.mark.parametrize("override", [o for o in GOOD if "config" in o] + [{}])
def test_config_the_model_accepts_the_operator_accepts(
    override: dict[str, Any], values: dict[str, Any]
) -> None:
    model = ChartValues.model_validate(merged(values, override))
    config = model.model_dump(by_alias=True, mode="json")["config"]
    parsed = parse_config(_operator_file(config))
    assert len(parsed.allowed_scripts) == len(config["security"]["skills"]["allowed"])


@pytest.mark.parametrize(
    "entry",
    [
        {"skill": "x", "path": "a.py", "sha256": "abc"},
        {"skill": "x", "path": "a.py", "sha256": "g" * 64},
        {"skill": "", "path": "a.py", "sha256": PIN},
        {"skill": "x", "path": "", "sha256": PIN},
    ],
)
def test_config_the_operator_rejects_the_model_rejects(
    entry: dict[str, Any], values: dict[str, Any]
) -> None:
    config = {
        "security": {"skills": {"allowScriptExecution": True, "allowed": [entry]}},
        "maxJobRecreations": 2,
    }
    with pytest.raises(ConfigError):
        parse_config(config)
    with pytest.raises(ValidationError):
        ChartValues.model_validate(merged(values, {"config": config}))
