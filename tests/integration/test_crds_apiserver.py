"""The generated CRDs in the real kube-apiserver: accepted, and the invalid corpus rejected
at admission with the same field paths the models report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from swarmkit_api import KINDS_BY_NAME
from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for
from tests.schema.corpus import INVALID, Invalid, example_manifests, run


def _create(kube: Kube, namespace: str, doc: dict[str, Any], dry_run: bool = True) -> Any:
    info = KINDS_BY_NAME[doc["kind"]]
    return kube.custom.create_namespaced_custom_object(
        "swarmkit.dev",
        "v1alpha1",
        namespace,
        info.plural,
        doc,
        dry_run="All" if dry_run else None,
        field_validation="Strict",
    )


def test_crds_are_established_with_columns(kube: Kube, crds: list[Path]) -> None:
    # One generated CRD file per API kind (Skill, Agent, Topology, Workspace, Run, Review,
    # MailboxMessage, Funnel, SpendQuota, EvalSet, EvalRun).
    assert sorted(p.name for p in crds) == sorted(
        f"{info.crd_name.split('.', 1)[1]}_{info.plural}.yaml" for info in KINDS_BY_NAME.values()
    )
    kinds = {
        "Skill",
        "Agent",
        "Topology",
        "Workspace",
        "Run",
        "Review",
        "MailboxMessage",
        "Funnel",
        "SpendQuota",
        "EvalSet",
        "EvalRun",
    }
    assert kinds == set(KINDS_BY_NAME)
    for info in KINDS_BY_NAME.values():
        crd = kube.apiext.read_custom_resource_definition(info.crd_name)
        conditions = {c.type: c.status for c in crd.status.conditions}
        assert conditions.get("Established") == "True", info.kind
        assert conditions.get("NamesAccepted") == "True", info.kind
        assert "swarmkit" in crd.spec.names.categories


@pytest.mark.parametrize(
    "doc", example_manifests(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}"
)
def test_examples_are_admitted(kube: Kube, crds: list[Path], namespace: str, doc: Any) -> None:
    created = _create(kube, namespace, doc, dry_run=False)
    # The apiserver applies no defaults to specs: what was applied is what is stored.
    assert created["spec"] == doc["spec"]


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_invalid_corpus_rejected_with_field_path(
    kube: Kube, crds: list[Path], namespace: str, case: Invalid
) -> None:
    with pytest.raises(ApiException) as info:
        _create(kube, namespace, case.manifest)
    assert info.value.status in (400, 422), info.value.body
    body = json.loads(info.value.body)
    fields = [c.get("field", "") for c in body.get("details", {}).get("causes", [])]
    text = body.get("message", "")
    assert case.path in fields or f"{case.path}:" in text or f'"{case.path}"' in text, (
        f"{case.name}: expected {case.path}; apiserver said {text}"
    )


def test_kubectl_explain_shows_descriptions(cluster: LocalCluster, crds: list[Path]) -> None:
    out = cluster.kubectl("explain", "skills.spec.implementation.cardUrl").stdout
    assert "A2A Agent Card" in out
    out = cluster.kubectl("explain", "runs.spec").stdout
    assert "topologyRef" in out and "Topology to run" in out


def test_category_lists_every_kind(cluster: LocalCluster, crds: list[Path], namespace: str) -> None:
    res = cluster.kubectl("get", "swarmkit", "-n", namespace, check=False)
    assert res.returncode == 0, res.stderr


RUN_AUTHOR = Path(__file__).resolve().parents[2] / "deploy" / "admission" / "run-author.yaml"


def test_wrong_type_is_named_by_the_schema_behind_the_run_author_policy(
    cluster: LocalCluster, kube: Kube, crds: list[Path], namespace: str
) -> None:
    """Issue 47.10: the mutating run-author policy runs before the schema; a wrong-typed
    field must still be reported by the schema with its name, not by the policy."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(RUN_AUTHOR))
    try:
        forged = {"a": "b", "swarmkit.dev/created-by": "mallory"}
        valid = {**run(), "metadata": {"name": "typed", "annotations": forged}}

        def records_the_creator() -> bool:
            annotations = _create(kube, namespace, valid)["metadata"].get("annotations", {})
            return annotations.get("swarmkit.dev/created-by") not in (None, "mallory")

        wait_for(records_the_creator, 60, interval=0.5, message="the run-author policy")
        # The annotations the request carried stay; only the author is the apiserver's.
        created = _create(kube, namespace, valid)["metadata"]["annotations"]
        assert created["a"] == "b" and created["swarmkit.dev/created-by"] != "mallory"
        with pytest.raises(ApiException) as info:
            _create(kube, namespace, run(timeoutSeconds="60"))
        text = json.loads(info.value.body).get("message", "")
        assert "spec.timeoutSeconds" in text and "must be of type integer" in text, text
        assert "swarmkit-run-author" not in text, text
    finally:
        cluster.kubectl("delete", "--ignore-not-found", "-f", str(RUN_AUTHOR), check=False)
