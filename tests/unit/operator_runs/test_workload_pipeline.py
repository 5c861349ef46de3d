"""The runner-workload pipeline's kinds: a Run's Job, a served Topology and an Agent gateway
build their pods and their NetworkPolicy with one builder each, belong to their target the
same way, and take an existing bundle ConfigMap through one step (exact for a served
workload, pinned for a Run)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swarmkit_api.agent import GatewaySpec
from swarmkit_api.bundle import BUNDLE_FILE, BUNDLE_SHA256_ENV
from swarmkit_api.conditions import REASON_PINNED_REVISION_MISSING, REASON_TAMPERED_OBJECT
from swarmkit_api.egress import EgressPlan
from swarmkit_api.topology import ServeSpec
from swarmkit_operator import egress
from swarmkit_operator.builders import bundle as bundles
from swarmkit_operator.builders import gateway as gw
from swarmkit_operator.builders import job as jobs
from swarmkit_operator.builders import netpol, pod, trust
from swarmkit_operator.builders import serve as sb
from swarmkit_operator.builders.job import build_job, bundle_config_map_name, target_of
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.gateways import Gateway, GatewayController
from swarmkit_operator.hashing import sha256_hex
from swarmkit_operator.runs import RunController
from swarmkit_operator.runs.model import Indexes
from swarmkit_operator.runs.observe import reconcile
from swarmkit_operator.serving import ServedTopology, reconcile_serving
from swarmkit_operator.workload import pipeline
from swarmkit_operator.workload.resolve import Resolved, Resolver
from tests.support.fake_k8s import FakeApi, fake_api

from .fixtures import example_bundle, examples
from .test_gateway_builder import rendered as agent_bundle
from .test_job_adoption import controller, sync

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


# -- through each kind's own path, on the fake API ----------------------------------------
RUNS_NS, SERVED_NS = "team-a", "team-b"


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    """The fake API; each target resolves to the examples' bundle (an Agent to its
    gateway's), with no refusal and no DNS (an empty egress plan: a NetworkPolicy that
    allows only the cluster DNS)."""
    fake = fake_api(monkeypatch)

    async def resolve(resolver: Resolver, target: Any, spec: Any) -> Resolved:
        return Resolved(agent_bundle() if target.kind == "Agent" else example_bundle()[1])

    async def no_refusal(*_: Any, **__: Any) -> None:
        return None

    async def plan(*_: Any, **__: Any) -> EgressPlan:
        return EgressPlan()

    monkeypatch.setattr(pipeline, "resolve", resolve)
    monkeypatch.setattr(pipeline, "refusals", no_refusal)
    monkeypatch.setattr(egress, "plan_for", plan)
    return fake


def _resolver() -> Resolver:
    found = Resolver(OperatorConfig(), None)  # type: ignore[arg-type]  # resolve is the fixture's
    found.ledger.since = datetime.now(UTC) - timedelta(hours=1)
    return found


def _runs(api: FakeApi, bundle_index: dict[Any, Any] | None = None) -> RunController:
    """The Runs controller over the fake's Runs (``bundle_index``: the reconcile loop's
    index of bundle ConfigMaps; an empty one says no bundle exists yet)."""
    ctl = controller(api)
    ctl.state.idx.bundles = bundle_index
    sync(api, ctl)
    return ctl


def _create_run(api: FakeApi, name: str = "r") -> dict[str, Any]:
    return api.create(
        {
            "apiVersion": "swarmkit.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": name, "namespace": RUNS_NS},
            "spec": {"agentRef": {"name": "a"}, "input": "x"},
        }
    )


class _Lookups:
    """The reconcile controller's index lookups serving reads (none indexed here)."""

    def lookup(self, index: str, key: Any) -> Any:
        return None

    def lookup_all(self, index: str, key: Any) -> list[Any]:
        return []


async def _policies_made(api: FakeApi) -> dict[str, tuple[dict[str, Any], str, Any]]:
    """The NetworkPolicy each workload's own path writes (with its target's uid and the
    ``createdUids`` its status write records): a Run's start (the Runs controller), a
    served Topology (the Topology reconcile's serving step) and an Agent gateway (the
    gateways controller)."""
    run = _create_run(api)
    uid = run["metadata"]["uid"]
    await reconcile(_runs(api).state, uid)
    topology = api.apply_spec("Topology", SERVED_NS, "review-pipeline", {"serve": SERVE.wire()})
    seen = {"uid": topology["metadata"]["uid"], "generation": 1, "spec": topology["spec"]}
    served = await reconcile_serving(
        _Lookups(),
        _resolver(),
        OperatorConfig(),
        SERVED_NS,
        "review-pipeline",
        {**seen, "status": {}},
        True,
    )
    spec = {**examples()[("Agent", "reviewer")]["spec"], "gateway": GATEWAY.wire()}
    agent = api.apply_spec("Agent", SERVED_NS, "reviewer", spec)
    seen = {"uid": agent["metadata"]["uid"], "generation": 1, "spec": spec, "status": {}}
    views = {(SERVED_NS, "reviewer"): [seen]}
    await GatewayController(OperatorConfig(), _resolver(), views).reconcile(SERVED_NS, "reviewer")

    def made(ns: str, name: str, owner: str, recorded: Any) -> tuple[dict[str, Any], str, Any]:
        policy = api.get("NetworkPolicy", ns, name)
        assert policy is not None, name
        return policy, owner, recorded or {}

    status = {
        k: (api.get(*k) or {}).get("status") or {}
        for k in (("Run", RUNS_NS, "r"), ("Agent", SERVED_NS, "reviewer"))
    }
    return {
        "run": made(
            RUNS_NS, jobs.job_name("r", uid), uid, status[("Run", RUNS_NS, "r")].get("createdUids")
        ),
        "serve": made(
            SERVED_NS,
            sb.serve_name("review-pipeline"),
            topology["metadata"]["uid"],
            served.fields.get("createdUids"),
        ),
        "gateway": made(
            SERVED_NS,
            gw.gateway_name("reviewer"),
            agent["metadata"]["uid"],
            status[("Agent", SERVED_NS, "reviewer")].get("createdUids"),
        ),
    }


async def test_a_new_networkpolicy_rule_reaches_all_three_workloads(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    mdns = {"protocol": "UDP", "port": 5353}
    assert mdns not in netpol.DNS_PORTS
    # One line in one builder (the egress rule every runner workload's policy opens) ...
    monkeypatch.setattr(netpol, "DNS_PORTS", [*netpol.DNS_PORTS, mdns])
    # ... and the Run's, the served Topology's and the gateway's NetworkPolicy all open it,
    # each controlled by its target and recorded in its status as the operator's.
    for kind, (policy, owner, recorded) in (await _policies_made(api)).items():
        [dns] = [rule for rule in policy["spec"]["egress"] if rule["to"] == [netpol.DNS_PEER]]
        assert mdns in dns["ports"], kind
        [ref] = policy["metadata"]["ownerReferences"]
        assert (ref["uid"], ref["controller"]) == (owner, True), kind
        key = trust.made_key("NetworkPolicy", policy["metadata"]["name"])
        assert recorded.get(key) == policy["metadata"]["uid"], kind


# -- step 3: the bundle, exact (served) or pinned (a Run) ---------------------------------
def _bundle_manifest(run_patch: dict[str, Any] | None = None) -> dict[str, Any]:
    run, rendered = example_bundle(run_patch=run_patch)
    return bundles.build_bundle_config_map(run.ref, rendered)


async def test_the_bundle_step_takes_an_existing_bundle_only_when_it_is_the_operators(
    api: FakeApi,
) -> None:
    first = _bundle_manifest()
    assert await pipeline.ensure_bundle(first) is None  # created now
    pinned = trust.data_digest(first["data"])
    # A Run keeps what it pinned first: a later render under the same name is not written,
    # the bundle there (with the digest the Run recorded) is returned to run with.
    later = _bundle_manifest({"input": "another render"})
    assert later["metadata"]["name"] == first["metadata"]["name"]
    found = await pipeline.ensure_bundle(later, pinned=pinned)
    assert found is not None and found["data"] == first["data"]
    # A served workload runs only what it renders now: the same name with other data is
    # not the operator's (its names are content-addressed).
    with pytest.raises(trust.Refused) as exact:
        await pipeline.ensure_bundle(later)
    assert exact.value.reason == REASON_TAMPERED_OBJECT
    assert "the workload's bundle" in exact.value.message
    # Nor is a bundle a Run did not pin.
    with pytest.raises(trust.Refused) as other:
        await pipeline.ensure_bundle(first, pinned=trust.data_digest(later["data"]))
    assert other.value.reason == REASON_TAMPERED_OBJECT
    assert "the run's bundle" in other.value.message
    assert (api.get("ConfigMap", RUNS_NS, first["metadata"]["name"]) or {})["data"] == first["data"]


async def test_a_bundle_gone_between_its_create_and_its_read_is_a_missing_pin(
    api: FakeApi,
) -> None:
    manifest = _bundle_manifest()
    api.refuse("POST", "configmaps", status=409)  # "already exists", then gone: a race
    with pytest.raises(trust.Refused) as gone:
        await pipeline.ensure_bundle(manifest, pinned=trust.data_digest(manifest["data"]))
    assert gone.value.reason == REASON_PINNED_REVISION_MISSING


async def test_a_runs_first_start_keeps_its_job_when_its_bundle_is_already_there(
    api: FakeApi,
) -> None:
    """The first attempt creates the bundle and the Job concurrently (the Run created → Job
    created latency). A bundle already under its name with exactly what the Job was built
    from (another process's start, a crash before the status write) is the Run's: the Job
    is kept and recorded, not deleted and made again."""
    uid = _create_run(api)["metadata"]["uid"]
    await reconcile(_runs(api).state, uid)
    name = jobs.job_name("r", uid)
    bundle = api.get("ConfigMap", RUNS_NS, bundle_config_map_name("r", uid))
    assert bundle is not None
    # Everything but the bundle is gone, and the Run's status with it: a first start again.
    api.delete("Job", RUNS_NS, name)
    api.delete("NetworkPolicy", RUNS_NS, name)
    recorded = (api.get("Run", RUNS_NS, "r") or {})["status"]
    api.set_status("Run", RUNS_NS, "r", dict.fromkeys(recorded))
    writes = len(api.writes())
    await reconcile(_runs(api, bundle_index={}).state, uid)  # the index knows no bundle
    job = api.get("Job", RUNS_NS, name)
    assert job is not None
    assert not [w for w in api.writes()[writes:] if w[0] == "DELETE"]  # kept, not remade
    status = (api.get("Run", RUNS_NS, "r") or {})["status"]
    assert (status["jobName"], status["bundleSha256"]) == (
        name,
        trust.data_digest(bundle["data"]),
    )
    assert status["createdUids"][trust.made_key("Job", name)] == job["metadata"]["uid"]
    assert api.get("ConfigMap", RUNS_NS, bundle_config_map_name("r", uid)) == bundle
