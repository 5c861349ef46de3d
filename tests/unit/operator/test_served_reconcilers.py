"""The served workloads' reconcilers on the fake API: an Agent gateway and a served Topology
(issue 37 item 9), and what proves their objects the operator's (issue 46 item 1).

Each runs as the operator runs it (the gateways controller's reconcile, the Topology
reconcile's serving step) against :class:`~tests.support.fake_k8s.FakeApi`; only the
target's resolution is the examples' bundle instead of the indexes' (the resolver is
tested on its own). What a user would see is read back from the fake: the objects made,
the owner's status (``Serving``, ``createdUids``), the Events.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swarmkit_api.conditions import REASON_TAMPERED_OBJECT, SERVING
from swarmkit_api.egress import EgressPlan
from swarmkit_operator import egress
from swarmkit_operator.builders import gateway as gw
from swarmkit_operator.builders import serve as sb
from swarmkit_operator.builders.workload import owner_reference
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.gateways import GatewayController
from swarmkit_operator.serving import reconcile_serving
from swarmkit_operator.workload import pipeline
from swarmkit_operator.workload.resolve import Resolved, Resolver
from tests.support.fake_k8s import FakeApi
from tests.unit.operator_runs.fixtures import example_bundle, examples
from tests.unit.operator_runs.test_gateway_builder import NAMESPACE as NS
from tests.unit.operator_runs.test_gateway_builder import rendered as agent_bundle

GATEWAY = {
    "enabled": True,
    "auth": {"tokens": [{"name": "ci", "secretKeyRef": {"name": "gw", "key": "ci"}}]},
}
GATEWAY_KINDS = ("NetworkPolicy", "ServiceAccount", "Role", "RoleBinding", "Service", "Deployment")
SERVED_KINDS = ("NetworkPolicy", "Service", "Deployment")


@pytest.fixture
def resolved(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the pipeline's resolve step answers (set per test), and no DNS."""
    answer: dict[str, Any] = {}

    async def resolve(resolver: Resolver, target: Any, spec: Any) -> Resolved:
        return Resolved(answer["bundle"])

    async def plan(*_: Any, **__: Any) -> EgressPlan:
        return EgressPlan()

    monkeypatch.setattr(pipeline, "resolve", resolve)
    monkeypatch.setattr(egress, "plan_for", plan)
    return answer


def resolver(since: datetime | None = None) -> Resolver:
    found = Resolver(OperatorConfig(), None)  # type: ignore[arg-type]  # resolve is the fixture's
    found.ledger.since = since or datetime.now(UTC) - timedelta(hours=1)
    return found


def view(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "uid": meta["uid"],
        "generation": meta.get("generation", 1),
        "spec": obj.get("spec") or {},
        "status": obj.get("status") or {},
    }


# -- the Agent gateway --------------------------------------------------------------------
def agent(api: FakeApi, gateway: dict[str, Any] | None = None) -> dict[str, Any]:
    spec = {**examples()[("Agent", "reviewer")]["spec"], "gateway": gateway or GATEWAY}
    return api.apply_spec("Agent", NS, "reviewer", spec)


def gateways(api: FakeApi, found: Resolver) -> GatewayController:
    views = {(NS, "reviewer"): [view(api.get("Agent", NS, "reviewer") or {})]}
    return GatewayController(OperatorConfig(), found, views)


async def test_a_gateway_is_made_recorded_and_adopted_by_a_new_process(
    api: FakeApi, resolved: dict[str, Any]
) -> None:
    resolved["bundle"] = agent_bundle()
    agent(api)
    await gateways(api, resolver()).reconcile(NS, "reviewer")
    name = gw.gateway_name("reviewer")
    made = {k: api.get(k, NS, name) for k in GATEWAY_KINDS}
    assert all(made.values()), made
    status = api.get("Agent", NS, "reviewer")["status"]  # type: ignore[index]
    assert status["createdUids"] == {
        f"{k}/{name}": obj["metadata"]["uid"] for k, obj in made.items() if obj
    }
    serving = api.condition("Agent", NS, "reviewer", SERVING) or {}
    assert serving.get("reason") != REASON_TAMPERED_OBJECT, serving
    # A new process that started leading after they were made: the records prove them.
    later = resolver(since=datetime.now(UTC) + timedelta(seconds=5))
    resolved["bundle"] = agent_bundle("v2")  # a new version: everything is applied again
    await gateways(api, later).reconcile(NS, "reviewer")
    deployment = api.get("Deployment", NS, name) or {}
    assert deployment["metadata"]["uid"] == made["Deployment"]["metadata"]["uid"]  # type: ignore[index]
    assert (api.condition("Agent", NS, "reviewer", SERVING) or {}).get("reason") != (
        REASON_TAMPERED_OBJECT
    )


async def test_a_gateway_deployment_with_a_copied_owner_is_never_applied_over(
    api: FakeApi, resolved: dict[str, Any]
) -> None:
    resolved["bundle"] = agent_bundle()
    owner = agent(api)
    name = gw.gateway_name("reviewer")
    target = gw.target_of(gw.AgentRef("reviewer", NS, owner["metadata"]["uid"]))
    forged = api.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": name,
                "namespace": NS,
                "ownerReferences": [owner_reference(target)],
            },
            "spec": {"template": {"spec": {"containers": [{"name": "eve", "image": "eve:1"}]}}},
        }
    )
    await gateways(api, resolver()).reconcile(NS, "reviewer")
    serving = api.condition("Agent", NS, "reviewer", SERVING) or {}
    assert (serving.get("status"), serving.get("reason")) == ("False", REASON_TAMPERED_OBJECT)
    assert f"Deployment {name}" in serving["message"]
    assert "no record of creating it" in serving["message"]
    assert api.get("Deployment", NS, name) == forged  # neither used nor changed
    assert api.get("Service", NS, name) is None  # nothing of the workload was written
    assert any(
        e["reason"] == REASON_TAMPERED_OBJECT and e["involvedObject"]["name"] == "reviewer"
        for e in api.list("Event", NS)
    )


async def test_disabling_a_gateway_deletes_it_and_clears_its_record(
    api: FakeApi, resolved: dict[str, Any]
) -> None:
    resolved["bundle"] = agent_bundle()
    agent(api)
    found = resolver()
    await gateways(api, found).reconcile(NS, "reviewer")
    agent(api, {"enabled": False})
    await gateways(api, found).reconcile(NS, "reviewer")
    name = gw.gateway_name("reviewer")
    assert all(api.get(k, NS, name) is None for k in GATEWAY_KINDS)
    assert not (api.get("Agent", NS, "reviewer") or {})["status"].get("createdUids")
    assert len(found.ledger) == 0


# -- the served Topology ------------------------------------------------------------------
class Lookups:
    """The reconcile controller's index lookups serving reads (none indexed here)."""

    def lookup(self, index: str, key: Any) -> Any:
        return None

    def lookup_all(self, index: str, key: Any) -> list[Any]:
        return []


def topology(api: FakeApi) -> dict[str, Any]:
    spec = {"serve": {"auth": {"bearerTokens": [{"name": "tokens", "key": "a"}]}}}
    obj = api.apply_spec("Topology", NS, "review-pipeline", spec)
    return view(obj)


async def test_a_served_topology_records_its_objects_and_refuses_a_planted_service(
    api: FakeApi, resolved: dict[str, Any]
) -> None:
    resolved["bundle"] = example_bundle()[1]
    seen = topology(api)
    found = resolver()
    result = await reconcile_serving(
        Lookups(), found, OperatorConfig(), NS, "review-pipeline", seen, True
    )
    name = sb.serve_name("review-pipeline")
    made = {k: api.get(k, NS, name) for k in SERVED_KINDS}
    assert all(made.values()), made
    assert result.fields["createdUids"] == {
        f"{k}/{name}": obj["metadata"]["uid"] for k, obj in made.items() if obj
    }
    # eve deletes the Service and makes her own under its name, the owner copied: the
    # next pass (a new version to apply) refuses it and writes nothing.
    service = made["Service"]
    assert service is not None
    api.delete("Service", NS, name)
    planted = api.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": NS,
                "ownerReferences": service["metadata"]["ownerReferences"],
            },
            "spec": {"ports": [{"port": 80}]},
        }
    )
    seen["status"] = {"createdUids": result.fields["createdUids"]}
    resolved["bundle"] = example_bundle(run_patch={"input": "another version"})[1]
    refused = await reconcile_serving(
        Lookups(), found, OperatorConfig(), NS, "review-pipeline", seen, True
    )
    [verdict] = refused.verdicts
    assert (verdict.status, verdict.reason) == ("False", REASON_TAMPERED_OBJECT)
    assert f"Service {name}" in verdict.message and "is not the" in verdict.message
    assert api.get("Service", NS, name) == planted
    assert refused.fields["createdUids"] == result.fields["createdUids"]  # the record stays
