"""The chart's Argo Rollouts ClusterAnalysisTemplate (promotion gated on evaluation):
rendered by the real helm, validated against Argo Rollouts' published CRD schema (its
release's ``manifests/crds``, fetched through the Go module proxy: tests/support/upstream.py),
and calling the operator's verdict endpoint.

The endpoint itself is tested in tests/unit/library/test_webview_verdicts.py.
"""

from __future__ import annotations

from typing import Any

import yaml

from tests.schema.kube_schema import validate
from tests.support.upstream import ARGO_ROLLOUTS, module_dir

from .test_chart_render import NAMESPACE, RELEASE, by_kind, render

API = "argoproj.io/v1alpha1/ClusterAnalysisTemplate"
WEB = {"webView": {"enabled": True}}


def crd() -> dict[str, Any]:
    crds = module_dir(ARGO_ROLLOUTS) / "manifests" / "crds"
    doc = yaml.safe_load((crds / "cluster-analysis-template-crd.yaml").read_text())
    assert doc["spec"]["names"]["kind"] == "ClusterAnalysisTemplate"
    return dict(doc)


def unknown_fields(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Fields the schema does not declare (what the apiserver's strict validation refuses)."""
    out: list[str] = []
    if isinstance(value, dict) and "properties" in schema:
        for key, sub in value.items():
            if key not in schema["properties"]:
                if not schema.get("x-kubernetes-preserve-unknown-fields"):
                    out.append(f"{path}.{key}")
                continue
            out += unknown_fields(schema["properties"][key], sub, f"{path}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            out += unknown_fields(schema["items"], item, f"{path}[{i}]")
    return out


def template(values: dict[str, Any], *extra: str) -> list[dict[str, Any]]:
    return by_kind(render(values, extra=extra), "ClusterAnalysisTemplate")


def test_the_template_validates_against_argo_rollouts_published_schema() -> None:
    (doc,) = template(WEB, "--api-versions", API)
    schema = crd()
    assert validate(schema, doc) == []
    openapi = schema["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert unknown_fields(openapi, doc) == []


def test_the_template_polls_the_verdict_endpoint_pass_to_fail() -> None:
    (doc,) = template(WEB, "--api-versions", API)
    (metric,) = doc["spec"]["metrics"]
    web = metric["provider"]["web"]
    assert web["url"] == (
        f"http://{RELEASE}-swarmkit-operator-web.{NAMESPACE}.svc:8082/verdicts/"
        "{{args.namespace}}/{{args.kind}}/{{args.name}}"
    )
    assert web["jsonPath"] == "{$.verdict}"
    assert metric["successCondition"] == 'result == "Pass"'
    assert metric["failureCondition"] == 'result == "Fail"'
    # Success ends it at the first Pass; a Fail at once; anything else is inconclusive
    # only once every measurement was taken.
    assert metric["consecutiveSuccessLimit"] == 1 and metric["failureLimit"] == 0
    assert metric["inconclusiveLimit"] == metric["count"]
    assert {a["name"] for a in doc["spec"]["args"]} == {"namespace", "name", "kind"}


def test_no_template_without_the_api_or_without_the_web_view() -> None:
    assert template(WEB) == []
    assert template({}, "--api-versions", API) == []
