"""An EvalRun grades and books only the Runs it can prove it created (issues 39 and 46).

An editor (built-in ``edit`` creates Runs) may take one of an EvalRun's planned Run names
first, with its labels and even the EvalRun's uid in a controller ownerReference, and an
input of her choosing. The EvalRun's ``status.createdUids`` (only the operator writes it)
and the operator's ledger decide: such a Run is never graded (its case is ``Errored`` with
``TamperedObject`` naming it), never starts under the EvalRun's up-front SpendQuota
reservation (it reserves its own cap), and its spend is not the EvalRun's.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from swarmkit_api.eval import EvalCase, EvalRunSpec
from swarmkit_api.run import RunSpec
from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator import k8s
from swarmkit_operator.builders import eval_runs as er
from swarmkit_operator.builders import trust
from swarmkit_operator.builders.run_verdict import rfc3339
from swarmkit_operator.handlers import evaluation
from swarmkit_operator.indexes import IndexId
from swarmkit_operator.runs import budget, spend
from swarmkit_operator.runs import status as run_status
from swarmkit_operator.runs.model import RunView
from swarmkit_operator.workload.ledger import Ledger

NS, EVALRUN, EVALRUN_UID = "team", "ev", "ev-uid"
OWNER = er.target(NS, EVALRUN, EVALRUN_UID)
PLANNED = er.run_name(EVALRUN, "case", "candidate", "says-billing", 0)
T0 = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)


def run_entry(
    uid: str,
    *,
    owned: bool = True,
    at: datetime = T0 + timedelta(minutes=5),
    generation: int = 1,
    output: str = "category: billing",
    usage: dict[str, Any] | None = None,
    reserved: list[str] | None = None,
) -> dict[str, Any]:
    """A Run under the planned name as the EvalRun's index holds it (finished, Succeeded)."""
    refs = [{"kind": "EvalRun", "uid": EVALRUN_UID, "controller": True}] if owned else []
    status: dict[str, Any] = {
        "conditions": [{"type": "Succeeded", "status": "True", "reason": "Succeeded"}],
        "output": output,
        "pinned": {"agents": {"triage": "v1"}},
        "usage": usage or {},
    }
    if reserved:
        status["spendReservations"] = reserved
    return {
        "name": PLANNED,
        "uid": uid,
        "labels": {er.EVAL_RUN_LABEL: EVALRUN},
        "metadata": {
            "name": PLANNED,
            "uid": uid,
            "generation": generation,
            "creationTimestamp": rfc3339(at),
            "ownerReferences": refs,
        },
        "status": status,
    }


def proof(recorded: dict[str, str] | None = None, created: tuple[str, ...] = ()) -> trust.Made:
    """The operator has led since T0 + 1 min; the EvalRun was created at T0."""
    return trust.Made(recorded or {}, frozenset(created), T0 + timedelta(minutes=1), T0)


def test_a_run_is_the_evalruns_only_by_its_recorded_or_remembered_uid() -> None:
    key = trust.made_key("Run", PLANNED)
    assert er.refused(run_entry("mine"), OWNER, proof({key: "mine"})) is None
    assert er.refused(run_entry("mine"), OWNER, proof(created=("mine",))) is None
    # The labels and a copied controller ownerReference, made while the operator leads.
    copied = er.refused(run_entry("eves"), OWNER, proof())
    assert copied is not None and copied.reason == "TamperedObject"
    assert f"Run {PLANNED} exists but was not created by the operator for EvalRun ev" in (
        copied.message
    )
    assert "ownerReference was copied" in copied.message
    # Deleted and re-created under the recorded name.
    again = er.refused(run_entry("eves"), OWNER, proof({key: "mine"}))
    assert again is not None and "is not the mine recorded" in again.message
    bare = er.refused(run_entry("eves", owned=False), OWNER, proof())
    assert bare is not None and "no controller ownerReference" in bare.message


def test_a_predecessors_unrecorded_run_is_adopted_but_not_one_older_than_the_evalrun() -> None:
    before_lead = T0 + timedelta(seconds=30)  # after the EvalRun, before this process led
    assert er.refused(run_entry("pred", at=before_lead), OWNER, proof()) is None
    older = er.refused(run_entry("pre", at=T0 - timedelta(minutes=1)), OWNER, proof())
    assert older is not None and "before the operator could make it" in older.message


def test_a_run_whose_spec_was_edited_after_the_create_is_not_graded() -> None:
    """Another input is another answer: ``metadata.generation`` moved past 1."""
    edited = run_entry("mine", generation=2)
    refused = er.refused(edited, OWNER, proof({trust.made_key("Run", PLANNED): "mine"}))
    assert refused is not None and refused.reason == "TamperedObject"
    assert "its spec was changed since (generation 2)" in refused.message


def ctx(runs: dict[str, dict[str, Any]], made: trust.Made) -> evaluation._Ctx:
    spec = EvalRunSpec.model_validate(
        {"evalSetRef": {"name": "cases"}, "candidate": {"agentRef": {"name": "triage"}}}
    )
    return evaluation._Ctx(NS, EVALRUN, EVALRUN_UID, spec, runs, OWNER, Ledger(), made, {})


def trial(c: evaluation._Ctx) -> Any:
    grader = {"type": "contains", "expected": "billing"}
    case = EvalCase.model_validate({"name": "says-billing", "input": "x", "grader": grader})
    progress = evaluation._Progress({"candidate": {}}, {}, {}, [])
    target = er.SideTarget("Agent", "triage", "v1")
    return evaluation._case_trial(c, case, "candidate", target, 0, progress), progress


def test_a_pre_created_case_run_is_never_graded_and_never_adopted() -> None:
    """eve's Run answers what the grader wants; the case is Errored, naming her Run."""
    c = ctx({PLANNED: run_entry("eves")}, proof())
    found, progress = trial(c)
    assert found.grade.outcome == "Errored"
    assert found.grade.reasoning.startswith(f"TamperedObject: Run {PLANNED} exists but")
    assert progress.create == []  # her name is not taken over either
    assert PLANNED in c.foreign and c.ledger.record(OWNER, {}) is None  # nothing adopted
    # The same Run, recorded as the EvalRun's own: graded (Passed).
    mine = ctx({PLANNED: run_entry("mine")}, proof({trust.made_key("Run", PLANNED): "mine"}))
    assert trial(mine)[0].grade.outcome == "Passed" and mine.foreign == {}


def test_a_predecessors_run_proven_by_rule_3_is_remembered_for_the_record() -> None:
    c = ctx({PLANNED: run_entry("pred", at=T0 + timedelta(seconds=30))}, proof())
    assert trial(c)[0].grade.outcome == "Passed"
    assert c.ledger.record(OWNER, {}) == {trust.made_key("Run", PLANNED): "pred"}


def usage(cost: str) -> dict[str, Any]:
    return {"cost": cost, "inputTokens": 100, "outputTokens": 10}


def test_settle_books_its_own_runs_only_and_never_one_that_reserved_its_own_cap() -> None:
    recorded = {trust.made_key("Run", PLANNED): "mine"}
    eves = {**run_entry("eves", usage=usage("0.5")), "name": PLANNED}
    mine = run_entry("mine", usage=usage("0.01"))
    own = er.own_runs([eves, mine], recorded)
    assert [r["uid"] for r in own] == ["mine"]
    assert er.spent(own) == (10_000, 110)
    # Its own Run that started before the record and reserved its own cap settles that
    # itself: not counted here too.
    raced = run_entry("mine", usage=usage("0.01"), reserved=["evals"])
    assert er.spent([raced, mine]) == (10_000, 110)
    unknown = run_entry("mine", usage={"costUnknown": True, "inputTokens": 5})
    assert er.spent([unknown]) == (None, 5)  # unknown never counts as 0


def view(labels: dict[str, str], uid: str = "eves") -> RunView:
    return RunView(
        name=PLANNED,
        namespace=NS,
        uid=uid,
        generation=1,
        spec={"agentRef": {"name": "triage"}, "input": "say exactly: refund"},
        status={},
        labels=labels,
        deleting=False,
        resource_version=1,
    )


class Gate:
    """budget.gate against one quota ``evals`` that holds the EvalRun's live reservation."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, status: dict[str, Any]) -> None:
        self.ledger = Ledger()
        self.reserved: list[str] = []
        # The EvalRuns index (uid → name and status.createdUids), as the watch fills it.
        evalruns = {EVALRUN_UID: [{"name": EVALRUN, "createdUids": status.get("createdUids")}]}
        st = SimpleNamespace(
            idx=SimpleNamespace(spend_quotas=None, eval_runs=evalruns),
            resolver=SimpleNamespace(ledger=self.ledger),
        )
        self.st: Any = st

        async def covering(_ns: str, _spec: Any) -> list[str]:
            return ["evals"]

        async def reservation_of(_ns: str, names: list[str], who: str) -> str | None:
            return EVALRUN_UID if who == f"EvalRun/{EVALRUN}" else None

        async def reserve_all(run: RunView, *_a: Any, **_k: Any) -> None:
            self.reserved.append(run.uid)

        async def write(*_a: Any, **_k: Any) -> None:
            return None

        monkeypatch.setattr(spend, "covering", covering)
        monkeypatch.setattr(spend, "reservation_of", reservation_of)
        monkeypatch.setattr(spend, "reserve_all", reserve_all)
        monkeypatch.setattr(run_status, "write", write)

    def start(self, run: RunView) -> bool:
        spec = RunSpec.model_validate(run.spec)
        ok, _ = asyncio.run(budget.gate(self.st, run, spec, WorkspaceSpec()))
        return ok


def test_a_labelled_run_the_evalrun_did_not_create_reserves_its_own_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = Gate(monkeypatch, {"createdUids": {trust.made_key("Run", PLANNED): "mine"}})
    assert gate.start(view({er.EVAL_RUN_LABEL: EVALRUN}, uid="eves"))
    assert gate.reserved == ["eves"]  # reserved on the quota like every Run
    assert gate.start(view({er.EVAL_RUN_LABEL: EVALRUN}, uid="mine"))
    assert gate.reserved == ["eves"]  # the recorded one starts under the EvalRun's
    assert gate.start(view({}, uid="plain"))
    assert gate.reserved == ["eves", "plain"]


def test_a_run_the_evalrun_created_moments_ago_starts_under_its_reservation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its record is on its way (not in the EvalRun's status yet): the ledger proves it."""
    gate = Gate(monkeypatch, {})
    gate.ledger.remember(OWNER, "Run", PLANNED, "fresh")
    assert gate.start(view({er.EVAL_RUN_LABEL: EVALRUN}, uid="fresh"))
    assert gate.reserved == []
    assert gate.start(view({er.EVAL_RUN_LABEL: EVALRUN}, uid="eves"))
    assert gate.reserved == ["eves"]


def test_an_evalrun_of_another_uid_proves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reservation is another EvalRun's of that name (deleted and re-created): the
    record of the EvalRun there now is not the reservation holder's."""
    gate = Gate(monkeypatch, {"createdUids": {trust.made_key("Run", PLANNED): "mine"}})

    async def reservation_of(_ns: str, _names: list[str], _who: str) -> str:
        return "older-evalrun-uid"

    monkeypatch.setattr(spend, "reservation_of", reservation_of)
    assert gate.start(view({er.EVAL_RUN_LABEL: EVALRUN}, uid="mine"))
    assert gate.reserved == ["mine"]


def test_a_name_taken_by_an_unlabelled_run_is_checked_when_the_create_finds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """eve's Run under the planned name without the label is not in the EvalRun's index:
    the create answers AlreadyExists, and the Run found there is checked at once (never
    counted as made); the Run the EvalRun does create is remembered for the record."""
    ledger = Ledger()
    ledger.start()  # this process leads from now on: eve's Run is made after that
    eves = run_entry("eves", at=datetime.now(UTC) + timedelta(minutes=1))
    body = {"metadata": {**eves["metadata"], "labels": {}}, "spec": {}, "status": eves["status"]}
    other = er.run_name(EVALRUN, "case", "candidate", "other", 0)
    created: list[str] = []

    async def create(_plural: str, _ns: str, manifest: dict[str, Any]) -> dict[str, Any] | None:
        name = manifest["metadata"]["name"]
        created.append(name)
        return None if name == PLANNED else {"metadata": {"name": name, "uid": "made"}}

    async def get_custom(plural: str, _ns: str, name: str) -> dict[str, Any] | None:
        return body if (plural, name) == ("runs", PLANNED) else None

    monkeypatch.setattr(k8s, "create_custom_if_absent", create)
    monkeypatch.setattr(k8s, "get_custom", get_custom)
    grader = {"type": "contains", "expected": "billing"}
    cases = tuple(
        EvalCase.model_validate({"name": n, "input": "x", "grader": grader})
        for n in ("says-billing", "other")
    )
    targets = {"candidate": er.SideTarget("Agent", "triage", "v1")}
    started = evaluation.Started(cases, targets, {})  # type: ignore[arg-type]
    ctl: Any = SimpleNamespace(lookup_all=lambda *_a: [], lookup=lambda *_a: None)
    view = {"uid": EVALRUN_UID, "status": {}, "created": rfc3339(T0)}
    spec = EvalRunSpec.model_validate(
        {"evalSetRef": {"name": "cases"}, "candidate": {"agentRef": {"name": "triage"}}}
    )
    ctx, progress, _grades, _calibrating = asyncio.run(
        evaluation._run_cases(ctl, view, spec, started, OWNER, ledger)
    )
    assert created == [PLANNED, other]
    refused = progress.trials["candidate"]["says-billing"][0].grade
    assert refused is not None and refused.outcome == "Errored", refused
    assert refused.reasoning.startswith(f"TamperedObject: Run {PLANNED} exists"), refused
    assert progress.trials["candidate"]["other"][0].grade is None  # made, running
    assert list(ctx.foreign) == [PLANNED]
    assert ledger.record(OWNER, {}) == {trust.made_key("Run", other): "made"}


def test_a_deleted_predecessors_run_is_waited_for_never_graded_nor_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The EvalRun was deleted and made again under its name: its predecessor's Run under
    the planned name (its controller an EvalRun that no longer exists) waits for the
    garbage collector, neither graded, nor created over, nor an errored case; a Run
    whose controller EvalRun still exists is checked (refused) as before."""
    created: list[str] = []

    async def create(_plural: str, _ns: str, manifest: dict[str, Any]) -> dict[str, Any] | None:
        created.append(manifest["metadata"]["name"])
        return {"metadata": {"name": manifest["metadata"]["name"], "uid": "made"}}

    monkeypatch.setattr(k8s, "create_custom_if_absent", create)
    old = run_entry("old-run")
    old["metadata"]["ownerReferences"] = [{"kind": "EvalRun", "uid": "old", "controller": True}]
    grader = {"type": "contains", "expected": "billing"}
    cases = (EvalCase.model_validate({"name": "says-billing", "input": "x", "grader": grader}),)
    started = evaluation.Started(cases, {"candidate": er.SideTarget("Agent", "triage", "v1")}, {})  # type: ignore[arg-type]
    view = {"uid": EVALRUN_UID, "status": {}, "created": rfc3339(T0)}
    spec = EvalRunSpec.model_validate(
        {"evalSetRef": {"name": "cases"}, "candidate": {"agentRef": {"name": "triage"}}}
    )

    def run_cases(live: set[str]) -> tuple[Any, Any]:
        ctl: Any = SimpleNamespace(
            lookup_all=lambda *_a: [old],
            lookup=lambda index, key: {} if index == IndexId.EVALRUN_UIDS and key in live else None,
        )
        ctx, progress, _g, _c = asyncio.run(
            evaluation._run_cases(ctl, view, spec, started, OWNER, Ledger())
        )
        return ctx, progress.trials["candidate"]["says-billing"][0]

    ctx, waiting = run_cases(set())
    assert waiting.grade is None and created == [] and ctx.foreign == {}
    ctx, refused = run_cases({"old"})  # another EvalRun's, alive: someone else's Run
    assert refused.grade is not None and refused.grade.outcome == "Errored", refused
    assert list(ctx.foreign) == [PLANNED] and created == []
