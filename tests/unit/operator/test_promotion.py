"""Promotion gated on evaluation, the pure part (builders/promotion.py): the state machine
from the first version to a promoted, failed, held, reviewed or forced candidate, and the
Topology render a promoted version runs from."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from swarmkit_api.promotion import PromotionSpec, PromotionStatus
from swarmkit_operator.builders import ObjectRef
from swarmkit_operator.builders import promotion as pr

NOW = datetime(2026, 12, 5, 23, 0, tzinfo=UTC)
OWNER = ObjectRef("Topology", "support", "team-a", "uid-1")
V1 = pr.Version("aaaaaaaaaaaa", "topology-support-11111111", ("agent-a-1",))
V2 = pr.Version("bbbbbbbbbbbb", "topology-support-22222222", ("agent-a-2", "skill-s-2"))


def spec(on_inconclusive: str = "hold", sets: tuple[str, ...] = ("smoke",)) -> PromotionSpec:
    return PromotionSpec.model_validate(
        {
            "evalSets": [{"name": s} for s in sets],
            "gate": {"onInconclusive": on_inconclusive, "minCases": 5},
        }
    )


def active_v1() -> PromotionStatus:
    return pr.decide(pr.PromotionInputs(spec(), V1, None, NOW)).status


def step(
    previous: PromotionStatus | None, current: pr.Version | None, **kw: object
) -> pr.PromotionPlan:
    kw.setdefault("spec", spec())
    return pr.decide(pr.PromotionInputs(current=current, previous=previous, now=NOW, **kw))  # type: ignore[arg-type]


def test_the_first_version_is_active_at_once() -> None:
    plan = step(None, V1)
    assert plan.status.active is not None and plan.status.active.version == V1.version
    assert plan.status.active.pins == list(V1.pins)
    assert plan.status.candidate is None
    assert (plan.verdict.status, plan.verdict.reason) == ("True", "Promoted")
    assert not plan.start_eval_sets


def test_a_new_version_is_a_candidate_and_its_evaluation_starts() -> None:
    plan = step(active_v1(), V2)
    assert plan.status.active is not None and plan.status.active.version == V1.version
    assert plan.status.candidate is not None and plan.status.candidate.version == V2.version
    assert plan.start_eval_sets == ("smoke",)
    assert (plan.verdict.status, plan.verdict.reason) == ("Unknown", "Evaluating")


def test_a_passing_candidate_is_promoted_and_the_old_one_kept_in_history() -> None:
    runs = {"smoke": pr.EvalOutcome("r1", "smoke", "Pass")}
    plan = step(active_v1(), V2, eval_runs=runs)
    assert plan.status.active is not None and plan.status.active.version == V2.version
    assert plan.status.active.eval_runs == ["r1"]
    assert plan.status.candidate is None
    assert [h.version for h in plan.status.history] == [V1.version]
    assert (plan.verdict.status, plan.verdict.reason) == ("True", "Promoted")


def test_a_failing_candidate_stays_unpromoted_naming_its_regressions() -> None:
    runs = {"smoke": pr.EvalOutcome("r1", "smoke", "Fail", ("refund", "greeting"))}
    plan = step(active_v1(), V2, eval_runs=runs)
    assert plan.status.active is not None and plan.status.active.version == V1.version
    assert plan.status.candidate is not None
    assert plan.status.candidate.verdict == "Fail"
    assert plan.status.candidate.regressions == ["smoke/refund", "smoke/greeting"]
    assert (plan.verdict.status, plan.verdict.reason) == ("False", "EvaluationFailed")
    assert "smoke/refund, smoke/greeting" in plan.verdict.message
    assert not plan.start_eval_sets


def test_one_failing_eval_set_fails_even_while_another_runs() -> None:
    runs = {"smoke": pr.EvalOutcome("r1", "smoke", "Fail", ("x",))}
    plan = step(active_v1(), V2, spec=spec(sets=("smoke", "full")), eval_runs=runs)
    assert plan.verdict.reason == "EvaluationFailed"


def test_every_eval_set_must_pass() -> None:
    runs = {"smoke": pr.EvalOutcome("r1", "smoke", "Pass")}
    plan = step(active_v1(), V2, spec=spec(sets=("smoke", "full")), eval_runs=runs)
    assert plan.status.active is not None and plan.status.active.version == V1.version
    assert plan.start_eval_sets == ("full",)
    assert plan.verdict.reason == "Evaluating"


def test_inconclusive_is_held_by_default_never_promoted() -> None:
    runs = {"smoke": pr.EvalOutcome("r1", "smoke", "Inconclusive")}
    plan = step(active_v1(), V2, eval_runs=runs)
    assert plan.status.active is not None and plan.status.active.version == V1.version
    assert (plan.verdict.status, plan.verdict.reason) == ("False", "Inconclusive")
    assert not plan.open_review


@pytest.mark.parametrize(
    ("decision", "status", "reason", "active"),
    [
        (None, "Unknown", "AwaitingReview", V1.version),
        ("approve", "True", "Promoted", V2.version),
        ("reject", "False", "Rejected", V1.version),
    ],
)
def test_inconclusive_with_review_asks_a_person(
    decision: str | None, status: str, reason: str, active: str
) -> None:
    runs = {"smoke": pr.EvalOutcome("r1", "smoke", "Inconclusive")}
    plan = step(
        active_v1(),
        V2,
        spec=spec("review"),
        eval_runs=runs,
        review_verdict=decision,
        review_name="promote-topology-support-bbbbbbbb",
    )
    assert (plan.verdict.status, plan.verdict.reason) == (status, reason)
    assert plan.status.active is not None and plan.status.active.version == active
    assert plan.open_review == (decision is None)


def test_a_forced_promotion_names_who() -> None:
    runs = {"smoke": pr.EvalOutcome("r1", "smoke", "Fail", ("x",))}
    plan = step(active_v1(), V2, eval_runs=runs, force=pr.Force(V2.version, "alice"))
    assert plan.status.active is not None and plan.status.active.version == V2.version
    assert plan.status.active.forced_by == "alice"
    assert (plan.verdict.status, plan.verdict.reason) == ("True", "Forced")
    assert "alice" in plan.verdict.message
    # ... and it stays so, saying who, on the next passes.
    again = step(plan.status, V2)
    assert (again.verdict.reason, "alice" in again.verdict.message) == ("Forced", True)


def test_a_force_for_another_version_does_nothing() -> None:
    plan = step(active_v1(), V2, force=pr.Force("cccccccccccc", "alice"))
    assert plan.verdict.reason == "Evaluating"


def test_a_missing_eval_set_is_named() -> None:
    plan = step(active_v1(), V2, missing_eval_sets=("smoke",))
    assert (plan.verdict.status, plan.verdict.reason) == ("False", "EvalSetNotFound")
    assert "smoke" in plan.verdict.message
    assert not plan.start_eval_sets


def test_a_version_that_is_not_ready_keeps_the_active_one() -> None:
    candidate = step(active_v1(), V2).status
    plan = step(candidate, None)
    assert plan.status == candidate
    assert (plan.verdict.status, plan.verdict.reason) == ("Unknown", "Waiting")


def test_going_back_to_the_active_version_drops_the_candidate() -> None:
    runs = {"smoke": pr.EvalOutcome("r1", "smoke", "Fail", ("x",))}
    failed = step(active_v1(), V2, eval_runs=runs).status
    plan = step(failed, V1)
    assert plan.status.candidate is None
    assert plan.verdict.reason == "Promoted"


def test_the_status_field_round_trips_through_the_model() -> None:
    runs = {"smoke": pr.EvalOutcome("r1", "smoke", "Fail", ("x",))}
    plan = step(active_v1(), V2, eval_runs=runs)
    wire = plan.status_field()
    assert PromotionStatus.model_validate(wire) == plan.status
    assert pr.kept_renders({"promotion": wire}) == {
        V1.config_map,
        *V1.pins,
        V2.config_map,
        *V2.pins,
    }
    assert pr.render_of({"promotion": wire}, None)["version"] == V1.version  # type: ignore[index]
    assert pr.render_of({"promotion": wire}, V2.version)["version"] == V2.version  # type: ignore[index]
    assert pr.render_of({"promotion": wire}, "dddddddddddd") is None


def test_a_topology_render_round_trips_and_pins_its_agents_and_skills() -> None:
    agents = {"triage": pr.PinnedAgentRender("v-a", "agent-triage-1", ("skill-s-1",))}
    spec_wire = {"workspaceRef": {"name": "default"}, "agents": [{"name": "root"}]}
    manifest, version = pr.topology_render(OWNER, "aaaaaaaaaaaa", spec_wire, agents, {}, {}, ())
    assert manifest["immutable"] is True
    assert manifest["metadata"]["name"].startswith("topology-support-")
    assert version.pins == ("agent-triage-1", "skill-s-1")
    back = pr.read_topology_render(manifest["data"])
    assert back.version == "aaaaaaaaaaaa"
    assert back.spec == spec_wire
    assert back.agents["triage"].config_map == "agent-triage-1"
    # Content-addressed: the same version renders to the same name.
    again, _ = pr.topology_render(OWNER, "aaaaaaaaaaaa", spec_wire, agents, {}, {}, ())
    assert again["metadata"]["name"] == manifest["metadata"]["name"]


def test_the_eval_run_compares_the_candidate_with_the_active_version() -> None:
    gate = spec().gate
    manifest = pr.eval_run_manifest(OWNER, "smoke", V2.version, V1.version, gate)
    assert manifest["spec"]["candidate"] == {
        "topologyRef": {"name": "support"},
        "version": V2.version,
    }
    assert manifest["spec"]["baseline"] == {
        "topologyRef": {"name": "support"},
        "version": V1.version,
    }
    assert manifest["spec"]["criteria"]["minCases"] == 5
    assert manifest["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert manifest["metadata"]["name"] == pr.eval_run_name(
        "Topology", "support", V2.version, "smoke"
    )
