"""The runner-workload pipeline's kinds: a Run's Job, a served Topology and an Agent gateway
build their pods with one builder and belong to their target the same way."""

from __future__ import annotations

from typing import Any

import pytest

from swarmkit_api.agent import GatewaySpec
from swarmkit_api.bundle import BUNDLE_FILE, BUNDLE_SHA256_ENV
from swarmkit_api.conditions import REASON_TAMPERED_OBJECT
from swarmkit_api.topology import ServeSpec
from swarmkit_operator.builders import gateway as gw
from swarmkit_operator.builders import pod, trust
from swarmkit_operator.builders import serve as sb
from swarmkit_operator.builders.job import build_job, bundle_config_map_name, target_of
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.gateways import Gateway
from swarmkit_operator.hashing import sha256_hex
from swarmkit_operator.runs.model import Indexes
from swarmkit_operator.serving import ServedTopology

from .fixtures import example_bundle
from .test_gateway_builder import rendered as agent_bundle

TOPOLOGY = sb.TopologyRef("review-pipeline", "team-b", "uid-topo")
AGENT = gw.AgentRef("reviewer", "team-b", "uid-agent", 3)
SERVE = ServeSpec.model_validate({"auth": {"bearerTokens": [{"name": "tokens", "key": "a"}]}})
GATEWAY = GatewaySpec.model_validate(
    {
        "enabled": True,
        "auth": {"tokens": [{"name": "ci", "secretKeyRef": {"name": "gw", "key": "ci"}}]},
    }
)


def _job() -> dict[str, Any]:
    run, rendered = example_bundle()
    return build_job(
        run=run.ref,
        bundle=rendered.bundle,
        skill_mounts=rendered.skill_mounts,
        config=OperatorConfig(),
        bundle_config_map=bundle_config_map_name(run.name, run.uid),
        flow_data_keys=rendered.flow_data_keys,
    )


def _served() -> dict[str, Any]:
    """The served Topology's Deployment, as the pipeline asks its kind for it."""
    kind = ServedTopology(TOPOLOGY, SERVE, OperatorConfig())
    shaped = kind.shape(example_bundle()[1])
    name = kind.bundle_config_map(shaped)["metadata"]["name"]
    return kind.manifests(shaped, name).deployment


def _gateway() -> dict[str, Any]:
    """The Agent gateway's Deployment, as the pipeline asks its kind for it."""
    kind = Gateway(AGENT, GATEWAY, OperatorConfig())
    shaped = kind.shape(agent_bundle())
    name = kind.bundle_config_map(shaped)["metadata"]["name"]
    return kind.manifests(shaped, name).deployment


def _env(workload: dict[str, Any]) -> dict[str, Any]:
    [container] = workload["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container["env"]}


WORKLOADS = {"run": _job, "serve": _served, "gateway": _gateway}


def test_a_new_env_var_of_the_runner_pod_reaches_all_three_workloads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for build in WORKLOADS.values():
        assert "SWARMKIT_NEW_SETTING" not in _env(build())
    # One line in one builder (the shared runner pod) ...
    monkeypatch.setattr(
        pod, "RUNNER_ENV", (*pod.RUNNER_ENV, {"name": "SWARMKIT_NEW_SETTING", "value": "on"})
    )
    # ... and the Job, the served Deployment and the gateway's Deployment all carry it.
    for kind, build in WORKLOADS.items():
        assert _env(build()).get("SWARMKIT_NEW_SETTING") == "on", kind


def test_every_workload_is_controlled_by_its_target() -> None:
    run, _ = example_bundle()
    targets = {
        "run": target_of(run.ref),
        "serve": sb.target_of(TOPOLOGY),
        "gateway": gw.target_of(AGENT),
    }
    for kind, build in WORKLOADS.items():
        workload = build()
        assert trust.owned_by(workload, targets[kind]), kind
        # adopted once its uid is the one its target recorded: no error
        made = {**workload, "metadata": {**workload["metadata"], "uid": "w-1"}}
        key = trust.made_key(workload["kind"], workload["metadata"]["name"])
        proof = trust.Made(recorded={key: "w-1"})
        assert trust.check_made(workload["kind"], made, targets[kind], proof) == "w-1"
        others = [t for k, t in targets.items() if k != kind]
        assert not any(trust.owned_by(workload, t) for t in others), kind
    assert (targets["serve"].workload, targets["gateway"].workload) == (
        "serve-review-pipeline",
        "gw-reviewer",
    )


def test_an_object_the_operator_did_not_make_is_refused_by_name() -> None:
    target = sb.target_of(TOPOLOGY)
    forged = {"metadata": {"name": "serve-review-pipeline", "ownerReferences": []}}
    with pytest.raises(trust.Refused) as refused:
        trust.check_made("Deployment", forged, target, trust.Made())
    assert refused.value.reason == REASON_TAMPERED_OBJECT
    assert "Deployment serve-review-pipeline" in refused.value.message
    assert "Topology review-pipeline" in refused.value.message
    # A copied uid without being the controller is not enough either.
    copied = {
        "metadata": {
            "name": "serve-review-pipeline",
            "ownerReferences": [{"kind": "Topology", "uid": TOPOLOGY.uid, "controller": False}],
        }
    }
    assert not trust.owned_by(copied, target)
    # Nor is a copied controller reference: only a uid the target recorded proves it.
    controlled = {
        "metadata": {
            "name": "serve-review-pipeline",
            "uid": "eve",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [{"kind": "Topology", "uid": TOPOLOGY.uid, "controller": True}],
        }
    }
    with pytest.raises(trust.Refused, match="no record of creating it"):
        trust.check_made("Deployment", controlled, target, trust.Made())
    assert trust.check_made("Deployment", None, target, trust.Made()) == ""  # nothing there


def test_served_pods_run_only_the_bundle_the_operator_wrote() -> None:
    """Like a Run's Job, a served pod carries the sha256 of the bundle.json its ConfigMap
    holds: the runner refuses a file replaced under that name."""
    kinds = {
        "serve": (ServedTopology(TOPOLOGY, SERVE, OperatorConfig()), example_bundle()[1]),
        "gateway": (Gateway(AGENT, GATEWAY, OperatorConfig()), agent_bundle()),
    }
    for label, (kind, resolved) in kinds.items():
        shaped = kind.shape(resolved)
        config_map = kind.bundle_config_map(shaped)
        deployment = kind.manifests(shaped, config_map["metadata"]["name"]).deployment
        written = config_map["data"][BUNDLE_FILE]
        assert _env(deployment)[BUNDLE_SHA256_ENV] == sha256_hex(written), label


def test_the_one_resolver_reads_the_live_indexes_even_when_they_start_empty() -> None:
    funnels: dict[Any, list[Any]] = {}
    reviews: dict[Any, list[Any]] = {}
    empty: dict[Any, list[Any]] = {}
    indexes = Indexes(
        runs=empty,
        jobs=empty,
        pods=empty,
        topologies=empty,
        agents=empty,
        skills=empty,
        workspaces=empty,
        funnels=funnels,
        skill_reviews=reviews,
    ).resolver()
    funnels[("team-b", "release")] = [{"spec": {}}]  # a Funnel appears after start-up
    reviews[("team-b", "notes")] = [{"status": {}}]
    assert indexes.funnels[("team-b", "release")] == [{"spec": {}}]
    assert indexes.skill_reviews[("team-b", "notes")] == [{"status": {}}]
