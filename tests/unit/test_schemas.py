"""The models and the generated CRDs agree: on every example and on the invalid corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from swarmkit_api import KINDS, ManifestError, validate_manifest
from swarmkit_api.common import MAX_JSON_DEPTH
from swarmkit_codegen import crdgen
from tests.schema import kube_schema
from tests.schema.corpus import INVALID, Invalid, agent, example_manifests, funnel, skill

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def crds() -> dict[str, dict[str, Any]]:
    return {info.kind: crdgen.crd_for(info) for info in KINDS}


def test_corpus_is_large_enough() -> None:
    assert len(INVALID) >= 30
    assert len({c.name for c in INVALID}) == len(INVALID)
    assert {c.manifest["kind"] for c in INVALID} == {k.kind for k in KINDS}


@pytest.mark.parametrize(
    "doc", example_manifests(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}"
)
def test_examples_pass_both_validators(doc: dict[str, Any], crds: dict[str, Any]) -> None:
    validate_manifest(doc)
    assert kube_schema.validate(crds[doc["kind"]], doc) == []


def test_examples_cover_every_kind_and_category() -> None:
    docs = example_manifests()
    # Reviews and MailboxMessages are created by the operator, never applied by users.
    created = {"Review", "MailboxMessage"}
    assert {d["kind"] for d in docs} == {k.kind for k in KINDS if k.kind not in created}
    skills = [d for d in docs if d["kind"] == "Skill"]
    assert {s["spec"]["category"] for s in skills} == {
        "capability",
        "decision",
        "coordination",
        "persistence",
    }
    assert any(f["path"].startswith("scripts/") for s in skills for f in s["spec"].get("files", []))
    assert any(s["spec"].get("instructions") for s in skills)


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_invalid_rejected_by_models_with_path(case: Invalid) -> None:
    with pytest.raises(ManifestError) as info:
        validate_manifest(case.manifest)
    paths = [e.path for e in info.value.errors]
    assert case.path in paths, f"{case.name}: expected {case.path}, models said {paths}"


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_invalid_rejected_by_crd_schema_with_path(case: Invalid, crds: dict[str, Any]) -> None:
    errors = kube_schema.validate(crds[case.manifest["kind"]], case.manifest)
    paths = [p for p, _ in errors]
    assert case.path in paths, f"{case.name}: expected {case.path}, schema said {errors}"


def test_every_schema_property_has_a_description(crds: dict[str, Any]) -> None:
    missing: list[str] = []

    def walk(node: dict[str, Any], path: str) -> None:
        for name, sub in node.get("properties", {}).items():
            where = f"{path}.{name}"
            if path.count(".") >= 1 and not sub.get("description"):
                missing.append(where)
            walk(sub, where)
        if isinstance(node.get("items"), dict):
            walk(node["items"], path + "[]")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], path + "{}")

    for kind, crd in crds.items():
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for part in ("spec", "status"):
            walk(schema["properties"][part], f"{kind}.{part}")
    assert missing == []


def test_schemas_are_structural(crds: dict[str, Any]) -> None:
    forbidden = {"$ref", "$defs", "title", "const", "anyOf", "default"}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            bad = forbidden & set(node)
            assert not bad, f"{path}: {bad}"
            if "properties" in node or "items" in node:
                assert "type" in node, f"{path}: no type"
            for key, value in node.items():
                if not key.startswith("x-kubernetes") and key not in ("enum", "required"):
                    walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]")

    for kind, crd in crds.items():
        walk(crd["spec"]["versions"][0]["schema"], kind)


def test_printer_columns_short_names_and_category(crds: dict[str, Any]) -> None:
    for kind, crd in crds.items():
        spec = crd["spec"]
        columns = [c["name"] for c in spec["versions"][0]["additionalPrinterColumns"]]
        if kind == "Review":
            assert {"Run", "Kind", "State", "DecidedBy", "Age"} <= set(columns)
        elif kind == "MailboxMessage":
            assert columns == ["Mailbox", "Agent", "Run", "Acknowledged", "Age"]
        elif kind == "SpendQuota":
            assert {"Used", "Limit", "Remaining", "Window", "Age"} <= set(columns)
        elif kind == "EvalRun":
            assert {"Verdict", "Succeeded", "Reason", "Candidate", "Baseline", "Age"} <= set(
                columns
            )
        else:
            assert ("Succeeded" if kind == "Run" else "Ready") in columns
            assert {"Reason", "Version", "Age"} <= set(columns)
        assert spec["names"]["shortNames"]
        assert spec["names"]["categories"] == ["swarmkit"]
        assert spec["versions"][0]["subresources"] == {"status": {}}


def test_generated_files_are_up_to_date() -> None:
    assert crdgen.verify(REPO) == []


def test_verify_detects_drift(tmp_path: Path) -> None:
    crdgen.write(tmp_path)
    target = tmp_path / "crds" / "swarmkit.dev_skills.yaml"
    target.write_text(target.read_text().replace("lowercase", "LOWERCASE", 1) + "# edited\n")
    problems = crdgen.verify(tmp_path)
    assert len(problems) == 1 and "swarmkit.dev_skills.yaml" in problems[0]


def test_generation_is_deterministic() -> None:
    assert crdgen.render_all() == crdgen.render_all()


def test_chart_crds_are_guarded_by_values() -> None:
    for rel, content in crdgen.render_all().items():
        if rel.parent == crdgen.CHART_CRD_DIR:
            assert content.splitlines()[0] == "{{- if .Values.crds.install }}"
            assert "helm.sh/resource-policy: keep" in content
            body = "\n".join(
                line
                for line in content.splitlines()
                if "{{" not in line and "resource-policy" not in line
            )
            assert yaml.safe_load(body)["kind"] == "CustomResourceDefinition"


def _nested(levels: int) -> dict[str, Any]:
    """An object nesting ``levels`` levels of objects and lists (alternating)."""
    value: Any = {}
    for i in range(levels - 1):
        value = {"v": value} if i % 2 else [value]
    return value if isinstance(value, dict) else {"v": value}


def _agent_with_arguments(value: Any) -> dict[str, Any]:
    return agent(replay=[{"toolCalls": [{"name": "t", "arguments": value}]}])


@pytest.mark.parametrize(
    ("field", "manifest_of"),
    [
        ("spec.outputs", lambda v: skill(outputs={"type": "object", "default": v})),
        ("spec.validate.schema", lambda v: funnel(validate={"schema": {"default": v}})),
        ("spec.replay[0].toolCalls[0].arguments", _agent_with_arguments),
    ],
)
def test_free_json_deeper_than_the_limit_is_refused_naming_the_field(
    field: str, manifest_of: Any
) -> None:
    # Issue 47.1/2: the limit is within what every builder serializes (pydantic stops near
    # 128 levels); the apiserver cannot count levels, the models refuse for the operator.
    ok = validate_manifest(manifest_of(_nested(MAX_JSON_DEPTH - 2)))
    json.dumps(ok.model_dump(by_alias=True, mode="json"))  # serializes
    for levels in (MAX_JSON_DEPTH + 1, 5000):  # a hostile depth too, not a RecursionError
        with pytest.raises(ManifestError) as info:
            validate_manifest(manifest_of(_nested(levels)))
        assert [e.path for e in info.value.errors] == [field], info.value.errors
