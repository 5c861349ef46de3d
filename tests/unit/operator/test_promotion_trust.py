"""A promotion counts only the EvalRuns it created, and pins renders by their sha256 (issues
39 and 46).

Anyone who may create EvalRuns can create one under the name a promotion plans for its
candidate (``<kind>-<name>-<evalset>-<version8>``), with the ``swarmkit.dev/promotion-of``
label, a copied controller ownerReference and criteria of their choosing (``minCases: 1``,
no margin): counted, it would promote a candidate no real evaluation passed. The promotion
records the uid of each EvalRun it creates in ``status.promotion.createdUids`` (only the
operator writes a status; the one ledger holds it until then) and counts an EvalRun only
when :func:`~swarmkit_operator.builders.trust.check_made` proves it its own; one under a
planned name that is not is ``Promoted=False TamperedObject``, never counted.

A promoted version's render is read back by the content digest recorded with it
(``renderedSha256``), not by the 8 hex digits its name ends in.
"""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from swarmkit_api.conditions import REASON_TAMPERED_OBJECT
from swarmkit_api.promotion import PROMOTION_LABEL, PromotionSpec, PromotionStatus
from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator import k8s
from swarmkit_operator import promotion as promotion_reconcile
from swarmkit_operator.builders import ObjectRef, config_map_name, content_digest, trust
from swarmkit_operator.builders import promotion as pr
from swarmkit_operator.builders.agent import RESOLVED_JSON, WorkspaceView, resolve_agent
from swarmkit_operator.builders.run_verdict import rfc3339
from swarmkit_operator.builders.workload import Target
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.reconcile.controller import Services
from swarmkit_operator.workload.ledger import Ledger
from swarmkit_operator.workload.resolve import Resolver, _Walk
from tests.support.fake_k8s import FakeApi, fake_api

NS = "team-a"
OWNER = ObjectRef("Agent", "triage", NS, "agent-uid")
TARGET = pr.promotion_target(OWNER)
V1 = pr.Version("aaaaaaaaaaaa", "agent-triage-11111111", (), "1" * 64)
V2 = pr.Version("bbbbbbbbbbbb", "agent-triage-22222222", ("skill-s-2",), "2" * 64)
SETS = ("smoke", "regress")
T0 = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)


def planned(eval_set: str, version: str = V2.version) -> str:
    return pr.eval_run_name("Agent", "triage", version, eval_set)


def evalrun(
    eval_set: str,
    uid: str,
    *,
    verdict: str | None = "Pass",
    name: str | None = None,
    version: str = V2.version,
    owned: bool = True,
    at: datetime = T0 + timedelta(minutes=5),
) -> dict[str, Any]:
    """An EvalRun of the candidate as the promotion's index holds it."""
    refs = [{"kind": "Agent", "name": "triage", "uid": OWNER.uid, "controller": True}]
    body = {
        "metadata": {
            "name": name or planned(eval_set, version),
            "uid": uid,
            "creationTimestamp": rfc3339(at),
            "ownerReferences": refs if owned else [],
            "labels": {PROMOTION_LABEL: pr.promotion_label("Agent", "triage")},
        },
        "spec": {
            "evalSetRef": {"name": eval_set},
            "candidate": {"agentRef": {"name": "triage"}, "version": version},
            "criteria": {"minCases": 1, "nonInferiorityMargin": 1.0},
        },
        "status": {"verdict": verdict} if verdict else {},
    }
    return pr.eval_run_outcome(body)


def proof(recorded: dict[str, str] | None = None, created: tuple[str, ...] = ()) -> trust.Made:
    """The operator has led since T0 + 1 min."""
    return trust.Made(recorded or {}, frozenset(created), T0 + timedelta(minutes=1))


def recorded(*names_uids: tuple[str, str]) -> dict[str, str]:
    return {trust.made_key("EvalRun", n): u for n, u in names_uids}


def test_only_the_evalruns_the_operator_recorded_or_remembers_count() -> None:
    entries = [evalrun("smoke", "mine"), evalrun("regress", "fresh", verdict=None)]
    counted = pr.counted_eval_runs(
        OWNER, V2.version, SETS, entries, proof(recorded((planned("smoke"), "mine")), ("fresh",))
    )
    assert counted.tampered == ()
    assert {k: (r.name, r.verdict) for k, r in counted.runs.items()} == {
        "smoke": (planned("smoke"), "Pass"),
        "regress": (planned("regress"), None),
    }
    assert counted.own == ((planned("smoke"), "mine"), (planned("regress"), "fresh"))


def test_an_evalrun_someone_else_created_under_the_planned_name_is_never_counted() -> None:
    """eve's lax EvalRun (labelled, the Agent's uid copied into a controller
    ownerReference, created while the operator leads) passes: not counted, named."""
    eves = evalrun("smoke", "eves")
    for made in (proof(), proof(recorded((planned("smoke"), "mine")))):
        counted = pr.counted_eval_runs(OWNER, V2.version, ("smoke",), [eves], made)
        assert counted.runs == {} and counted.own == ()
        (why,) = counted.tampered
        assert why.startswith(f"EvalRun {planned('smoke')} exists but was not created by the")
    # Without even the ownerReference: the same.
    bare = evalrun("smoke", "eves", owned=False)
    assert pr.counted_eval_runs(OWNER, V2.version, ("smoke",), [bare], proof()).tampered


def test_an_evalrun_under_another_name_is_not_the_promotions() -> None:
    """Labelled for the Agent and evaluating the candidate, under a name the promotion does
    not plan: ignored (the promotion still starts its own)."""
    other = evalrun("smoke", "eves", name="triage-smoke-by-eve")
    counted = pr.counted_eval_runs(OWNER, V2.version, ("smoke",), [other], proof())
    assert counted == pr.Counted({}, (), ())
    plan = decide(counted)
    assert plan.start_eval_sets == ("smoke",)
    assert plan.verdict.reason == "Evaluating"


def test_a_recorded_evalrun_of_another_candidate_under_the_name_is_not_counted() -> None:
    """Under the planned name, proven, but evaluating another version or EvalSet: never
    counted (the spec of an EvalRun is immutable: only a forged record could say so)."""
    other = evalrun("smoke", "mine", version="bbbbbbbbzzzz")
    made = proof(recorded((planned("smoke"), "mine")))
    counted = pr.counted_eval_runs(OWNER, V2.version, ("smoke",), [other], made)
    assert counted.runs == {}
    why = f"EvalRun {planned('smoke')} does not evaluate {V2.version} on smoke"
    assert counted.tampered == (why,)


def decide(counted: pr.Counted, sets: tuple[str, ...] = ("smoke",)) -> pr.PromotionPlan:
    spec = PromotionSpec.model_validate({"evalSets": [{"name": s} for s in sets]})
    active = pr.decide(pr.PromotionInputs(spec, V1, None, T0)).status
    return pr.decide(
        pr.PromotionInputs(spec, V2, active, T0, eval_runs=counted.runs, tampered=counted.tampered)
    )


def test_a_tampered_evalrun_holds_the_candidate_whatever_the_others_say() -> None:
    entries = [evalrun("smoke", "eves"), evalrun("regress", "mine")]
    made = proof(recorded((planned("regress"), "mine")))
    plan = decide(pr.counted_eval_runs(OWNER, V2.version, SETS, entries, made), SETS)
    assert (plan.verdict.status, plan.verdict.reason) == ("False", REASON_TAMPERED_OBJECT)
    assert planned("smoke") in plan.verdict.message
    assert plan.status.active is not None and plan.status.active.version == V1.version
    assert plan.status.candidate is not None and plan.status.candidate.version == V2.version
    assert plan.start_eval_sets == ()


class Ctl:
    """What reconcile_promotion reads: the indexes (EvalRuns, EvalSets, Reviews) and the
    one ledger (the resolver's)."""

    def __init__(self, entries: list[dict[str, Any]], ledger: Ledger) -> None:
        self.entries = entries
        resolver = Resolver(OperatorConfig(), None)  # type: ignore[arg-type]
        resolver.ledger = ledger
        self.services = Services(resolver=resolver)

    def lookup_all(self, index: str, _key: Any) -> list[dict[str, Any]]:
        return list(self.entries) if index == promotion_reconcile.EVAL_RUNS_INDEX else []

    def lookup(self, index: str, key: Any) -> Any:
        return {"spec": {}} if index == promotion_reconcile.EVAL_SETS_INDEX else None


def agent_view(promotion: dict[str, Any]) -> dict[str, Any]:
    return {
        "spec": {"promotion": {"evalSets": [{"name": "smoke"}]}},
        "status": {"promotion": promotion},
        "annotations": {},
    }


ACTIVE_V1 = {"active": {"version": V1.version, "renderedConfigMap": V1.config_map}}


def reconcile(ctl: Any, promotion: dict[str, Any]) -> promotion_reconcile.Promotion:
    view = agent_view(promotion)
    return asyncio.run(promotion_reconcile.reconcile_promotion(ctl, OWNER, view, V2))


def test_the_evalrun_it_creates_is_recorded_then_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[dict[str, Any]] = []

    async def create(plural: str, _ns: str, manifest: dict[str, Any]) -> dict[str, Any]:
        created.append(manifest)
        return {"metadata": {**manifest["metadata"], "uid": "made"}}

    monkeypatch.setattr(k8s, "create_custom_if_absent", create)
    ledger = Ledger()
    ctl = Ctl([], ledger)
    first = reconcile(ctl, ACTIVE_V1)
    assert [m["metadata"]["name"] for m in created] == [planned("smoke")]
    key = trust.made_key("EvalRun", planned("smoke"))
    assert first.fields["promotion"]["createdUids"] == {key: "made"}
    assert first.verdicts[0].reason == "Evaluating"

    # Its Pass shows in the index (the record too): counted, promoted, record kept.
    ctl.entries = [evalrun("smoke", "made", at=datetime.now(UTC))]
    second = reconcile(ctl, first.fields["promotion"])
    assert second.verdicts[0].reason == "Promoted", second.verdicts
    status = PromotionStatus.model_validate(second.fields["promotion"])
    assert status.active is not None and status.active.version == V2.version
    assert status.active.eval_runs == [planned("smoke")]
    assert status.created_uids == {key: "made"}
    assert len(ledger) == 0  # recorded: the ledger let go of it


def test_the_record_keeps_the_candidates_and_every_evalrun_that_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its own EvalRun the index does not show yet stays recorded (else it would read as
    someone else's); an older candidate's stays while it exists (the spec may go back to
    it), and goes with it."""

    async def create(*_a: Any) -> None:
        return None

    async def get_custom(*_a: Any) -> None:
        return None

    monkeypatch.setattr(k8s, "create_custom_if_absent", create)
    monkeypatch.setattr(k8s, "get_custom", get_custom)
    old = planned("smoke", "cccccccccccc")
    record = recorded((planned("smoke"), "mine"), (old, "older"))
    ctl = Ctl([evalrun("smoke", "older", version="cccccccccccc")], Ledger())
    kept = reconcile(ctl, {**ACTIVE_V1, "createdUids": record})
    assert kept.fields["promotion"]["createdUids"] == record
    ctl.entries = []  # the older EvalRun was deleted
    gone = reconcile(ctl, {**ACTIVE_V1, "createdUids": record})
    assert gone.fields["promotion"]["createdUids"] == recorded((planned("smoke"), "mine"))


def test_a_planned_name_taken_first_is_tampered_and_never_adopted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """eve's EvalRun without the label is not in the index: the create finds the name
    taken and the EvalRun there is checked at once."""
    ledger = Ledger()
    ledger.start()
    eves = evalrun("smoke", "eves", at=datetime.now(UTC) + timedelta(minutes=1))

    async def create(*_a: Any) -> None:
        return None

    async def get_custom(plural: str, _ns: str, name: str) -> dict[str, Any] | None:
        if (plural, name) != ("evalruns", planned("smoke")):
            return None
        return {"metadata": eves["metadata"], "spec": {
            "evalSetRef": {"name": "smoke"},
            "candidate": {"agentRef": {"name": "triage"}, "version": V2.version},
        }, "status": {"verdict": "Pass"}}  # fmt: skip

    monkeypatch.setattr(k8s, "create_custom_if_absent", create)
    monkeypatch.setattr(k8s, "get_custom", get_custom)
    done = reconcile(Ctl([], ledger), ACTIVE_V1)
    (verdict,) = done.verdicts
    assert (verdict.status, verdict.reason) == ("False", REASON_TAMPERED_OBJECT)
    assert f"EvalRun {planned('smoke')} exists but was not created by the operator" in (
        verdict.message
    )
    assert "createdUids" not in done.fields["promotion"]
    assert done.fields["promotion"]["active"]["version"] == V1.version
    assert len(ledger) == 0


def test_a_serving_topologys_record_and_its_promotions_are_kept_apart() -> None:
    """One owner creates for two workloads (a Topology serves and promotes): each record
    gets only its own objects."""
    ledger = Ledger()
    topology = ObjectRef("Topology", "support", NS, "topo-uid")
    serve = Target("Topology", NS, "support", "topo-uid", "serve-support")
    promote = pr.promotion_target(topology)
    ledger.remember(serve, "Deployment", "serve-support", "d1")
    ledger.remember(promote, "EvalRun", "topology-support-smoke-aaaa", "e1")
    assert ledger.record(serve, {}) == {"Deployment/serve-support": "d1"}
    assert ledger.record(promote, {}) == {"EvalRun/topology-support-smoke-aaaa": "e1"}
    assert ledger.proof(serve, {}).created == frozenset({"d1"})
    ledger.forget("topo-uid")  # the Topology is gone: both go
    assert len(ledger) == 0


# --- item 2: a promoted version's render by its sha256 -----------------------------------------


def test_a_promoted_version_carries_its_renders_sha256() -> None:
    spec = PromotionSpec.model_validate({"evalSets": [{"name": "smoke"}]})
    first = pr.decide(pr.PromotionInputs(spec, V1, None, T0))
    assert first.status.active is not None and first.status.active.rendered_sha256 == V1.sha256
    runs = {"smoke": pr.EvalOutcome("r", "smoke", "Pass")}
    second = pr.decide(pr.PromotionInputs(spec, V2, first.status, T0, eval_runs={}))
    assert second.status.candidate is not None
    assert second.status.candidate.rendered_sha256 == V2.sha256
    promoted = pr.decide(pr.PromotionInputs(spec, V2, second.status, T0, eval_runs=runs))
    wire = promoted.status_field()
    assert wire["active"]["renderedSha256"] == V2.sha256
    assert wire["history"][0]["renderedSha256"] == V1.sha256
    assert promotion_reconcile.agent_version(
        {"version": "v", "renderedConfigMap": "cm", "renderedSha256": "d" * 64}, True
    ) == pr.Version("v", "cm", (), "d" * 64)


def test_a_topology_version_records_its_digest_and_its_agents() -> None:
    owner = ObjectRef("Topology", "support", NS, "u")
    agents = {"triage": pr.PinnedAgentRender("v-a", "agent-triage-1", ("skill-s-1",), "a" * 64)}
    spec = {"workspaceRef": {"name": "default"}, "agents": [{"name": "root"}]}
    manifest, version = pr.topology_render(owner, "aaaaaaaaaaaa", spec, agents, {}, {}, ())
    assert version.sha256 == content_digest(manifest["data"])
    assert manifest["metadata"]["name"] == config_map_name(owner, str(version.sha256))
    back = pr.read_topology_render(manifest["data"])
    assert back.agents["triage"].sha256 == "a" * 64


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    return fake_api(monkeypatch)


def resolver(agents: dict[Any, list[dict[str, Any]]]) -> Resolver:
    """A resolver whose Agents index holds ``agents`` (no other index is read)."""
    return Resolver(OperatorConfig(), SimpleNamespace(agents=agents))  # type: ignore[arg-type]


def forged_agent_render() -> tuple[dict[str, Any], str]:
    """Agent ``oncall``'s render as an editor would have it (wider permissions), under the
    name its own content gives (what a 2^32 search on the name's 8 hex digits finds for
    the real render's name), and the digest the operator recorded for the real one."""
    ws_spec = {"modelProviders": [{"name": "replay", "type": "replay"}]}
    ws = WorkspaceView("default", WorkspaceSpec.model_validate(ws_spec), ready=True)
    spec = {
        "workspaceRef": {"name": "default"},
        "model": {"provider": "replay", "name": "replay"},
        "systemPrompt": "Triage incidents.",
    }
    render = resolve_agent(ObjectRef("Agent", "oncall", NS, "u"), spec, {}, ws, {})
    assert render.config_map is not None
    real = content_digest(render.config_map["data"])
    cm = copy.deepcopy(render.config_map)
    resolved = json.loads(cm["data"][RESOLVED_JSON])
    resolved["permissions"] = ["*"]
    cm["data"][RESOLVED_JSON] = json.dumps(resolved)
    owner = ObjectRef("Agent", "oncall", NS, "u")
    cm["metadata"]["name"] = config_map_name(owner, content_digest(cm["data"]))
    return cm, real


async def test_the_active_agent_render_is_read_by_its_recorded_sha256(api: FakeApi) -> None:
    cm, real = forged_agent_render()
    api.create(cm)
    name = cm["metadata"]["name"]
    entry = {"version": "v1", "renderedConfigMap": name, "renderedSha256": real}
    agent = {"status": {"promotion": {"active": entry}, "conditions": []}}
    with pytest.raises(trust.Refused) as refused:
        await resolver({(NS, "oncall"): [agent]})._resolve_agent(NS, "oncall", _Walk())
    assert refused.value.reason == REASON_TAMPERED_OBJECT
    assert f"the render recorded {real[:12]}" in refused.value.message
    # A record from before the digest was kept: the name is all there is (it matches).
    del entry["renderedSha256"]
    found = await resolver({(NS, "oncall"): [agent]})._resolve_agent(NS, "oncall", _Walk())
    assert found.agent.config_map == name  # type: ignore[union-attr]


async def test_a_promoted_topologys_render_is_read_by_its_recorded_sha256(api: FakeApi) -> None:
    owner = ObjectRef("Topology", "support", NS, "u")
    root = {"name": "root", "agentRef": {"name": "triage"}, "role": "root"}
    spec = {"workspaceRef": {"name": "default"}, "agents": [root]}
    manifest, version = pr.topology_render(owner, "aaaaaaaaaaaa", spec, {}, {}, {}, ())
    api.create(manifest)
    entry = {"version": "aaaaaaaaaaaa", "renderedConfigMap": version.config_map}
    topo = {"status": {"promotion": {"active": {**entry, "renderedSha256": "f" * 64}}}}
    with pytest.raises(trust.Refused) as refused:
        await resolver({})._promoted_topology(NS, "support", topo, _Walk())
    assert refused.value.reason == REASON_TAMPERED_OBJECT
    topo = {"status": {"promotion": {"active": {**entry, "renderedSha256": version.sha256}}}}
    walk = _Walk()
    assert await resolver({})._promoted_topology(NS, "support", topo, walk)
    assert walk.topologies["support"].version == "aaaaaaaaaaaa"
