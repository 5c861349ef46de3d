"""What the operator trusts of an object it reads back (issue 46): digests and refusals."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from swarmkit_api.conditions import REASON_PINNED_REVISION_MISSING, REASON_TAMPERED_OBJECT
from swarmkit_operator.builders import trust
from swarmkit_operator.builders.bundle import build_bundle_config_map, bundle_data

from .fixtures import example_bundle


def test_digest_is_of_the_data_whatever_the_key_order() -> None:
    a = trust.data_digest({"bundle.json": "{}", "flow-x": "é"})
    assert a == trust.data_digest({"flow-x": "é", "bundle.json": "{}"})
    assert a != trust.data_digest({"bundle.json": "{}", "flow-x": "e"})
    assert a != trust.data_digest({"bundle.json": "{}", "flow-x": "é", "extra": ""})


def test_the_bundle_digest_recorded_is_the_digest_of_the_config_map_written() -> None:
    run, rendered = example_bundle(None)
    cm = build_bundle_config_map(run.ref, rendered)
    recorded = trust.data_digest(bundle_data(rendered))
    assert trust.check("bundle", "b", cm, recorded) is cm


def test_another_content_by_the_same_name_is_refused_naming_it() -> None:
    run, rendered = example_bundle(None)
    cm = build_bundle_config_map(run.ref, rendered)
    recorded = trust.data_digest(cm["data"])
    forged = {**cm, "data": {**cm["data"], "bundle.json": cm["data"]["bundle.json"] + " "}}
    with pytest.raises(trust.Refused) as refused:
        trust.check("the run's bundle", "run-x-0a1b2", forged, recorded)
    assert refused.value.reason == REASON_TAMPERED_OBJECT
    assert "the run's bundle ConfigMap run-x-0a1b2 is not the one the operator wrote" in str(
        refused.value
    )
    # same content, labels and owner copied or not: only the content counts
    relabelled = {**cm, "metadata": {"name": "run-x-0a1b2"}}
    assert trust.check("the run's bundle", "run-x-0a1b2", relabelled, recorded) is relabelled


def test_gone_is_pinned_revision_missing() -> None:
    with pytest.raises(trust.Refused) as refused:
        trust.check("the run's checkpoint", "run-x-0a1b2-ckpt-0", None, "0" * 64)
    assert refused.value.reason == REASON_PINNED_REVISION_MISSING
    assert "run-x-0a1b2-ckpt-0" in refused.value.message


def test_failed_mount_names_the_missing_config_map_of_the_newest_event() -> None:
    from swarmkit_operator.builders.run_pod import failed_mount

    kubelet = {
        "reason": "FailedMount",
        "lastTimestamp": "2026-12-05T10:00:05Z",
        "message": 'MountVolume.SetUp failed for volume "skill-0" : '
        'configmap "skill-deploy-1a2b3c4d" not found',
    }
    older = {**kubelet, "lastTimestamp": "2026-12-05T10:00:01Z", "message": "other"}
    process_node = {
        "reason": "FailedMount",
        "message": "MountVolume.SetUp failed: configmap run-x-0a1b2-ckpt-0 not found",
    }
    assert failed_mount([older, kubelet, {"reason": "Scheduled"}]) == (
        kubelet["message"],
        "skill-deploy-1a2b3c4d",
    )
    assert failed_mount([process_node]) == (process_node["message"], "run-x-0a1b2-ckpt-0")
    assert failed_mount([{"reason": "FailedMount", "message": "timed out"}]) == (
        "timed out",
        None,
    )
    assert failed_mount([{"reason": "Pulled"}]) is None


POLICY: dict[str, Any] = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "serve-oracle"},
    "spec": {
        "podSelector": {"matchLabels": {"swarmkit.dev/serve": "oracle"}},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"ports": [{"port": 8080}]}],
        "egress": [],
    },
}


def test_drift_ignores_what_the_apiserver_adds() -> None:
    found = copy.deepcopy(POLICY)
    found["metadata"].update(uid="u1", resourceVersion="7", managedFields=[{}])
    found["spec"]["ingress"][0]["ports"][0]["protocol"] = "TCP"  # defaulted
    del found["spec"]["egress"]  # an empty list is dropped
    assert trust.drift(found, POLICY) is None


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (lambda p: p["spec"].update(ingress=[{}]), "spec.ingress[0].ports"),
        (lambda p: p["spec"]["ingress"].append({}), "spec.ingress"),
        (lambda p: p["spec"].update(podSelector={}), "spec.podSelector.matchLabels"),
        (
            lambda p: p["spec"]["ingress"][0]["ports"][0].update(port=9),
            "spec.ingress[0].ports[0].port",
        ),
    ],
    ids=["opened-to-all", "rule-appended", "selector-emptied", "port-changed"],
)
def test_drift_names_the_first_field_an_edit_changed(edit: Any, where: str) -> None:
    found = copy.deepcopy(POLICY)
    edit(found)
    assert trust.drift(found, POLICY) == where


def test_other_managers_name_who_else_wrote_an_object() -> None:
    found = copy.deepcopy(POLICY)
    found["metadata"]["managedFields"] = [
        {"manager": "swarmkit-operator", "operation": "Apply"},
        {"manager": "kubectl-patch", "operation": "Update"},
    ]
    assert trust.other_managers(found, "swarmkit-operator") == ["kubectl-patch"]
    assert trust.other_managers(POLICY, "swarmkit-operator") == []
