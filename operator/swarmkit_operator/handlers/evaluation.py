"""EvalSets and EvalRuns, each a kind declared once (:data:`EVAL_SET`, :data:`EVAL_RUN`).

An EvalSet is checked and versioned (:mod:`swarmkit_operator.builders.eval_set`); its
declaration watches the Skills and Agents its judges name (:data:`EVAL_SET_KIND`'s
``watches``): a judge Skill created, deleted or changed (its category), a judge Agent
created or deleted, enqueues it.

An EvalRun is driven by its reconcile, which every event of one of its Runs enqueues
(``eval_case_runs``, by the ``swarmkit.dev/eval-run`` label):

1. **start** (once): wait for the EvalSet to be Ready and both sides' targets to be Ready;
   snapshot the cases into an immutable ConfigMap whose digest goes to status, and pin each
   side's version (the asked one; the baseline's default is the target's promoted
   ``status.promotion.active.version``, else its ``status.version``);
2. **reserve** (once): the worst case of every Run it may create, on the SpendQuotas that
   cover them, before the first one (its Runs reserve nothing of their own; what they
   spent is settled against it once the verdict is written and they all finished);
   a quota that cannot cover it refuses the EvalRun with the quota's reason;
3. **progress**: every (case, side, trial) is a Run through the one Run pipeline (its
   bundle, Job); a model grader's judge is a Run of the judge
   Agent once the case's Run succeeded. At most ``parallelism`` of them are unfinished at
   once. A result another EvalRun already graded for the same key (case, target, version,
   grader, trials) is reused instead (``eval_results``);
4. **calibrate**: a judge Run on every human-labelled answer of its judged cases, read as
   the judge's kappa against the people (:mod:`swarmkit_operator.builders.eval_calibration`);
5. **grade and write**: :func:`swarmkit_operator.builders.eval_results.evaluate`, and once
   nothing is pending, the verdict with ``Succeeded=True`` (reason ``Evaluated``, or the
   calibration gate's reason with an ``Inconclusive`` verdict).

A case Run that failed (a budget refusal included), pinned another version than its side's,
or whose judge could not give a verdict makes the case ``Errored``: never passed.

The EvalRun grades only Runs it can prove it created (issue 39 with 46's rule): it records
each one's uid in ``status.createdUids`` with the status write after the create (the one
:class:`~swarmkit_operator.workload.ledger.Ledger` of the operator holds it meanwhile),
and a Run under one of its planned names that :func:`~swarmkit_operator.builders.eval_runs.refused`
does not accept (another uid, a copied ownerReference, an edited spec) is never graded nor
adopted: its case is ``Errored`` with ``TamperedObject`` naming the Run, and a Warning
Event says the same. Its up-front reservation covers, and its settle books, only those
Runs (:mod:`swarmkit_operator.runs.budget`). A Run there whose controller is a deleted
EvalRun (a predecessor under the same name) is waited for until the garbage collector
deletes it (:func:`~swarmkit_operator.builders.eval_runs.orphaned`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from swarmkit_api import GROUP, VERSION
from swarmkit_api.conditions import (
    READY,
    REASON_BUDGET_EXHAUSTED,
    REASON_EVAL_SET_NOT_FOUND,
    REASON_EVAL_SET_NOT_READY,
    REASON_INVALID,
    REASON_PINNED_REVISION_MISSING,
    REASON_RUNNING,
    REASON_TAMPERED_OBJECT,
    REASON_TARGET_NOT_READY,
    REASON_VERSION_UNAVAILABLE,
    SUCCEEDED,
)
from swarmkit_api.eval import (
    MODEL_GRADERS,
    EvalCase,
    EvalRunSpec,
    EvalSetSpec,
    FunnelAgreement,
    JudgeCalibration,
    SideResult,
)
from swarmkit_api.resources import EVAL_RUN, EVAL_SET
from swarmkit_api.run import RunSpec
from swarmkit_api.spend import format_money, parse_money
from swarmkit_api.workspace import WorkspaceSpec

from .. import k8s, metrics
from ..builders import Verdict, trust
from ..builders import eval_calibration as cal
from ..builders import eval_runs as er
from ..builders import spend as quota
from ..builders.agent import workspace_name
from ..builders.eval_graders import Grade, errored, grade, grade_judge, judge_input
from ..builders.eval_results import CaseInfo, Evaluated, Trial, evaluate
from ..builders.eval_set import eval_set_status
from ..builders.run_verdict import parse_time, rfc3339
from ..builders.workload import Target
from ..hashing import label_value
from ..indexes import IndexId
from ..reconcile.controller import Controller, Kind, Observation, Watch, existence_changed
from ..reconcile.status import StatusOf
from ..reconcile.views import MISSING, base_view, condition_status
from ..runs import spend, summaries
from ..runs.model import RUNS
from ..workload.ledger import Ledger
from ..workload.resolve import ledger_of, ready
from .common import App, index
from .events import on_event

#: How often an EvalRun waiting for its EvalSet or a target looks again without an event.
WAIT_RECHECK = 5.0


# --- indexes -----------------------------------------------------------------------------------


@index("evalsets", id=IndexId.EVALSET_VIEWS)
def evalset_views(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    view = base_view(body)
    view["spec"] = dict(body.get("spec") or {})
    return {(namespace, name): view}


@index("evalsets", id=IndexId.EVALSET_BY_JUDGE_SKILL)
def evalset_by_judge_skill(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, Skill) → EvalSets whose judges name it (Ready reads its category)."""
    return {(namespace, s): name for s in _judges(body, "skill")}


@index("evalsets", id=IndexId.EVALSET_BY_JUDGE_AGENT)
def evalset_by_judge_agent(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, Agent) → EvalSets whose judges name it (Ready reads that it exists)."""
    return {(namespace, a): name for a in _judges(body, "agent")}


def _judges(body: Mapping[str, Any], field: str) -> set[str]:
    """The names under ``field`` of an EvalSet spec's graders (the cases', ``fromRuns``')."""
    spec = body.get("spec") or {}
    graders = [c.get("grader") for c in spec.get("cases") or () if isinstance(c, dict)]
    graders.append((spec.get("fromRuns") or {}).get("grader"))
    return {g[field] for g in graders if isinstance(g, dict) and isinstance(g.get(field), str)}


@index("evalruns", id=IndexId.EVALRUN_VIEWS)
def evalrun_views(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    view = base_view(body)
    view["spec"] = dict(body.get("spec") or {})
    # No Run of it can be its own from before it existed (trust.check_made's not_before).
    view["created"] = (body.get("metadata") or {}).get("creationTimestamp")
    return {(namespace, name): view}


@index("evalruns", id=IndexId.EVALRUN_UIDS)
def evalrun_uids(body: kopf.Body, name: str, **_: Any) -> dict[Any, Any]:
    """uid → its name and ``status.createdUids``: the SpendQuota refresh keeps the
    reservations of EvalRuns that exist, and a Run's budget gate asks whether the EvalRun
    holding a reservation created that Run (:mod:`swarmkit_operator.runs.budget`)."""
    uid = (body.get("metadata") or {}).get("uid")
    created = dict((body.get("status") or {}).get("createdUids") or {})
    return {uid: {"name": name, "createdUids": created}} if uid else {}


@index("evalruns", id=IndexId.EVALRUN_BY_SET)
def evalrun_by_set(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    """(namespace, EvalSet) → its unfinished EvalRuns (they wait for it to be Ready)."""
    if (body.get("status") or {}).get("completionTime"):
        return {}
    ref = ((body.get("spec") or {}).get("evalSetRef") or {}).get("name")
    return {(namespace, ref): name} if isinstance(ref, str) else {}


@index("evalruns", id=IndexId.EVAL_RESULTS)
def eval_results(body: kopf.Body, namespace: str | None, **_: Any) -> dict[Any, Any]:
    """(namespace, cache key) → a side result a finished EvalRun graded itself."""
    status = body.get("status") or {}
    if not status.get("completionTime"):
        return {}
    out: dict[Any, Any] = {}
    for case in status.get("cases") or ():
        for side in ("candidate", "baseline"):
            result = case.get(side) if isinstance(case, dict) else None
            if (
                isinstance(result, dict)
                and result.get("key")
                and result.get("outcome") in ("Passed", "Failed")
                and not result.get("cached")
            ):
                out[(namespace, result["key"])] = result
    return out


@index("evalruns", id=IndexId.EVALSET_CALIBRATIONS)
def evalset_calibrations(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, EvalSet) → the judges' calibration of each of its finished EvalRuns."""
    status = body.get("status") or {}
    ref = ((body.get("spec") or {}).get("evalSetRef") or {}).get("name")
    if not status.get("completionTime") or not status.get("judges") or not isinstance(ref, str):
        return {}
    keep = ("completionTime", "evalSetVersion", "judges")
    return {(namespace, ref): {"name": name, **{k: status.get(k) for k in keep}}}


@index("runs", id=IndexId.EVAL_CASE_RUNS, group=GROUP, version=VERSION)
def eval_case_runs(
    body: kopf.Body, namespace: str | None, labels: Mapping[str, str], **_: Any
) -> dict[Any, Any]:
    """(namespace, EvalRun) → the Runs labelled as its case and judge Runs (the label
    proves nothing: each is checked against its record before it counts)."""
    owner = labels.get(er.EVAL_RUN_LABEL)
    return {(namespace, owner): _run_entry(body)} if owner else {}


@index("runs", id=IndexId.FUNNEL_DECISIONS, group=GROUP, version=VERSION)
def funnel_decisions(body: kopf.Body, namespace: str | None, **_: Any) -> dict[Any, Any]:
    """(namespace, judge skill) → the decided gate rounds of a Run its skill judged, from
    the Run's ``status.gates`` (the operator's own record of admission-checked decisions;
    nobody else writes a Run's status). As bounded as the Runs kept."""
    return {(namespace, s): tuple(pairs) for s, pairs in cal.funnel_pairs(body).items()}


def funnel_agreements(
    ctl: Controller, namespace: str, skills: Iterable[str]
) -> dict[str, FunnelAgreement]:
    """skill → its agreement with people's Funnel decisions (skills with at least one),
    judged by its current version (the Skill's ``status.contentHash``)."""
    out = {}
    for skill in sorted(set(skills)):
        found = [
            d for ds in ctl.lookup_all(IndexId.FUNNEL_DECISIONS, (namespace, skill)) for d in ds
        ]
        view = ctl.lookup(IndexId.SKILL_VIEWS, (namespace, skill)) or {}
        if found:
            out[skill] = cal.funnel_agreement(skill, found, view.get("contentHash"))
    return out


def _run_entry(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Run summary with what :func:`~swarmkit_operator.builders.eval_runs.refused` reads
    of its metadata (uid, generation, creation time, controller ownerReference)."""
    summary = summaries.run_summary(body)
    meta = body.get("metadata") or {}
    summary["metadata"] = {
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "generation": meta.get("generation"),
        "creationTimestamp": meta.get("creationTimestamp"),
        "ownerReferences": summaries.controller_refs(meta),
    }
    return summary


# --- events of what they depend on -------------------------------------------------------------


@on_event(*RUNS)
async def evaluation_on_run_event(
    body: kopf.Body, namespace: str | None, labels: Mapping[str, str], app: App, **_: Any
) -> None:
    if not namespace:
        return
    ctl = app.controller
    owner = labels.get(er.EVAL_RUN_LABEL)
    if owner:
        ctl.enqueue("EvalRun", namespace, owner)
    # A Run whose gates record judged decisions: the EvalSets judging with those skills
    # show the agreement (an idempotent reconcile; its status write is skipped unchanged).
    for skill in cal.funnel_pairs(body):
        judging = ctl.lookup_all(IndexId.EVALSET_BY_JUDGE_SKILL, (namespace, skill))
        ctl.enqueue_many("EvalSet", namespace, judging)


# --- EvalSet -----------------------------------------------------------------------------------


def judge_changed(seen: Observation) -> bool:
    """A judge Skill created or deleted, or what a Skill's dependents compare changed (its
    category among it): what an EvalSet's Ready reads of the Skills its judges name."""
    return existence_changed(seen) or seen.changed


def evalset_dependents_view(view: dict[str, Any] | None) -> Any:
    """What the EvalRuns waiting on an EvalSet read: its version and readiness."""
    if view is None:
        return MISSING
    return (view["status"].get("version"), view["ready"], view["observed"] == view["generation"])


async def reconcile_evalset(ctl: Controller, namespace: str, name: str, force: bool) -> str:
    view = ctl.lookup(IndexId.EVALSET_VIEWS, (namespace, name))
    if view is None:
        return "gone"

    def category(skill: str) -> str | bool | None:
        found = ctl.lookup(IndexId.SKILL_VIEWS, (namespace, skill))
        return False if found is None else found.get("category")

    status = eval_set_status(
        view["spec"],
        category,
        lambda a: ctl.lookup(IndexId.AGENT_VIEWS, (namespace, a)) is not None,
    )
    found = ctl.lookup_all(IndexId.EVALSET_CALIBRATIONS, (namespace, name))
    agreement = funnel_agreements(ctl, namespace, _judges(view, "skill"))
    shown = {"funnelAgreement": [a.wire() for a in agreement.values()]} if agreement else {}
    written = await ctl.write_status(
        StatusOf.of_view("EvalSet", namespace, name, view),
        {**status.fields, **latest_calibration(found, status.fields.get("version")), **shown},
        status.verdicts,
    )
    return "changed" if written else "unchanged"


def latest_calibration(found: list[Mapping[str, Any]], version: str | None) -> dict[str, Any]:
    """The judges' kappa as the newest finished EvalRun of this EvalSet version measured
    it (an edit of the labels is a new version: an older calibration is not shown)."""
    mine = [f for f in found if f.get("evalSetVersion") == version]
    if not mine:
        return {}  # server-side apply: fields left out are removed
    newest = max(mine, key=lambda f: (str(f.get("completionTime")), str(f.get("name"))))
    return {"judges": newest["judges"], "calibrationEvalRun": newest["name"]}


EVAL_SET_KIND = Kind(
    "EvalSet",
    priority=3,  # after the Skills and Agents its judges name
    reconcile=reconcile_evalset,
    api=EVAL_SET,
    indexes=(evalset_views, evalset_by_judge_skill, evalset_by_judge_agent),
    dependents_view=evalset_dependents_view,
    watches=(
        Watch("Skill", IndexId.EVALSET_BY_JUDGE_SKILL, when=judge_changed),
        Watch("Agent", IndexId.EVALSET_BY_JUDGE_AGENT, when=existence_changed),
    ),
)


# --- EvalRun: start ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Started:
    """What an EvalRun evaluates, fixed when it started (and kept in its status)."""

    cases: tuple[EvalCase, ...]
    targets: Mapping[er.Side, er.SideTarget]
    fields: Mapping[str, Any]  # the status fields recording it


def _status_of(
    ctl: Controller, name: str, namespace: str, view: Mapping[str, Any]
) -> dict[str, Any]:
    """The EvalRun's status, or the one this process wrote and the watch has not shown yet
    (a reconcile right after the start must not start it twice)."""
    waiting = ctl.book.awaiting.get(("EvalRun", namespace, name))
    return dict(waiting[2]) if waiting is not None else dict(view["status"])


def _side_target(
    ctl: Controller, namespace: str, ref: Mapping[str, Any], version: str | None, promoted: bool
) -> er.SideTarget | str:
    """A side's target at its version, or why it is not ready."""
    kind = "Topology" if ref.get("topologyRef") else "Agent"
    name = str((ref.get("topologyRef") or ref.get("agentRef") or {}).get("name"))
    index = IndexId.RUNS_TOPOLOGIES if kind == "Topology" else IndexId.RUNS_AGENTS
    summary = ctl.lookup(index, (namespace, name))
    if summary is None:
        return f"{kind} {name} not found"
    ok, why = ready(summary)
    if not ok:
        return f"{kind} {name} is not Ready ({why})"
    status = summary.get("status") or {}
    active = (status.get("promotion") or {}).get("active") or {}
    current = active.get("version") if promoted else None
    chosen = version or current or status.get("version")
    if not chosen:
        return f"{kind} {name} has no version yet"
    # Its Runs pin what the Resolver picks: a version it does not offer would only give
    # errored cases (VersionUnavailable), at the price of every Run.
    promotion = status.get("promotion") or {}
    offered = {
        status.get("version"),
        *((promotion.get(side) or {}).get("version") for side in ("active", "candidate")),
    }
    if chosen not in offered:
        return (
            f"{kind} {name} does not offer version {chosen} (its Runs pin {status.get('version')})"
        )
    return er.SideTarget(kind, name, str(chosen))  # type: ignore[arg-type]


def _targets(
    ctl: Controller, namespace: str, spec: EvalRunSpec
) -> dict[er.Side, er.SideTarget] | str:
    cand = spec.candidate.wire()
    out: dict[er.Side, er.SideTarget] = {}
    found = _side_target(ctl, namespace, cand, spec.candidate.version, promoted=False)
    if isinstance(found, str):
        return f"candidate: {found}"
    out["candidate"] = found
    if spec.compare:
        base = spec.baseline.wire() if spec.baseline is not None else {}
        ref = base if ("topologyRef" in base or "agentRef" in base) else cand
        version = spec.baseline.version if spec.baseline is not None else None
        found = _side_target(ctl, namespace, ref, version, promoted=True)
        if isinstance(found, str):
            return f"baseline: {found}"
        out["baseline"] = found
    return out


def _cases_of(ctl: Controller, namespace: str, spec: EvalSetSpec) -> list[EvalCase]:
    cases = list(spec.cases)
    if spec.from_runs is not None:
        every = (
            r
            for uid in ctl.indexes.keys(IndexId.RUNS_BY_UID)
            for r in ctl.lookup_all(IndexId.RUNS_BY_UID, uid)
        )
        runs = [r for r in every if r.get("namespace") == namespace]
        names = {c.name for c in cases}
        cases += [c for c in er.recorded_cases(spec.from_runs, runs) if c.name not in names]
    return cases


async def _start(
    ctl: Controller, namespace: str, name: str, view: Mapping[str, Any], spec: EvalRunSpec
) -> Started | Verdict:
    """Fix what the EvalRun evaluates (module docstring, step 1), or why it cannot yet."""
    status = _status_of(ctl, name, namespace, view)
    if status.get("casesSha256"):
        return await _restarted(ctl, namespace, status)
    set_name = spec.eval_set_ref.name
    eval_set = ctl.lookup(IndexId.EVALSET_VIEWS, (namespace, set_name))
    if eval_set is None:
        return Verdict(
            SUCCEEDED, "Unknown", REASON_EVAL_SET_NOT_FOUND, f"EvalSet {set_name} not found"
        )
    if not eval_set["ready"] or eval_set["observed"] != eval_set["generation"]:
        why = condition_status(eval_set["status"], READY)[1] or "not reconciled yet"
        return Verdict(
            SUCCEEDED, "Unknown", REASON_EVAL_SET_NOT_READY, f"EvalSet {set_name}: {why}"
        )
    targets = _targets(ctl, namespace, spec)
    if isinstance(targets, str):
        return Verdict(SUCCEEDED, "Unknown", REASON_TARGET_NOT_READY, targets)
    cases = _cases_of(ctl, namespace, EvalSetSpec.model_validate(eval_set["spec"]))
    manifest, digest = er.snapshot_config_map(namespace, name, view["uid"], cases)
    if await k8s.create_config_map(manifest) is None:  # there already: ours only by digest
        found = await _snapshot(namespace, manifest["metadata"]["name"], digest)
        if isinstance(found, Verdict):
            return found
    fields: dict[str, Any] = {
        "evalSetVersion": eval_set["status"].get("version"),
        "startTime": rfc3339(datetime.now(UTC)),
        "casesConfigMap": manifest["metadata"]["name"],
        "casesSha256": digest,
        **{side: {"target": t.label, "version": t.version} for side, t in targets.items()},
    }
    return Started(tuple(cases), targets, fields)


async def _snapshot(namespace: str, cm_name: str, digest: str) -> dict[str, Any] | Verdict:
    """The snapshot's data, when it is the one the operator wrote (its digest)."""
    found = await k8s.read_config_map(namespace, cm_name)
    if found is None:
        return Verdict(
            SUCCEEDED,
            "False",
            REASON_PINNED_REVISION_MISSING,
            f"the cases' ConfigMap {cm_name} is gone",
        )
    data = dict(found.get("data") or {})
    if er.snapshot_digest(data) != digest:
        return Verdict(
            SUCCEEDED,
            "False",
            REASON_TAMPERED_OBJECT,
            f"ConfigMap {cm_name} does not hold the cases the operator wrote: not used",
        )
    return data


async def _restarted(
    ctl: Controller, namespace: str, status: Mapping[str, Any]
) -> Started | Verdict:
    """What an EvalRun that started earlier evaluates, from its status and its snapshot."""
    cm_name, digest = str(status.get("casesConfigMap")), str(status.get("casesSha256"))
    data = await _snapshot(namespace, cm_name, digest)
    if isinstance(data, Verdict):
        return data
    cases = er.parse_snapshot(data)
    targets: dict[er.Side, er.SideTarget] = {}
    for side in ("candidate", "baseline"):
        summary = status.get(side) or {}
        if summary.get("target") and summary.get("version"):
            kind, _, target = str(summary["target"]).partition("/")
            targets[side] = er.SideTarget(kind, target, str(summary["version"]))  # type: ignore[arg-type]
    keep = ("evalSetVersion", "startTime", "casesConfigMap", "casesSha256", "spendReservations")
    fields = {k: status[k] for k in keep if k in status}
    fields.update({s: {"target": t.label, "version": t.version} for s, t in targets.items()})
    return Started(tuple(cases), targets, fields)


# --- EvalRun: progress -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Ctx:
    namespace: str
    name: str
    uid: str
    spec: EvalRunSpec
    runs: Mapping[str, Mapping[str, Any]]
    owner: Target
    ledger: Ledger
    made: trust.Made
    #: The Runs found under a planned name that are not provably its own: name → why.
    foreign: dict[str, str]

    def foreign_run(self, run: Mapping[str, Any]) -> str | None:
        """Why ``run`` (under one of the planned names) is not graded, or None when it is
        the EvalRun's own (then remembered, so a predecessor's Run is recorded too)."""
        name, uid = str(run.get("name")), str(run.get("uid") or "")
        refused = er.refused(run, self.owner, self.made)
        if refused is not None:
            self.foreign[name] = refused.message
            return f"{refused.reason}: {refused.message}"
        if self.made.recorded.get(trust.made_key("Run", name)) != uid:
            self.ledger.remember(self.owner, "Run", name, uid)
        return None


@dataclass
class _Progress:
    trials: dict[str, dict[str, list[Trial]]]
    keys: dict[tuple[str, str], str]
    cached: dict[tuple[str, str], SideResult]
    create: list[dict[str, Any]]
    active: int = 0
    currency: str | None = None


def _finished(run: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(status, reason, message) of a finished Run's Succeeded condition (None: running)."""
    for cond in (run.get("status") or {}).get("conditions") or ():
        if cond.get("type") == SUCCEEDED and cond.get("status") in ("True", "False"):
            return str(cond["status"]), str(cond.get("reason", "")), str(cond.get("message", ""))
    return None


def _spent(run: Mapping[str, Any], progress: _Progress) -> dict[str, Any]:
    """A finished Run's cost and latency, as a Trial's fields."""
    status = run.get("status") or {}
    usage = status.get("usage") or {}
    progress.currency = progress.currency or usage.get("currency")
    start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    return {
        "cost_micros": parse_money(usage["cost"]) if usage.get("cost") else None,
        "cost_unknown": bool(usage.get("costUnknown")),
        "latency_seconds": (end - start).total_seconds() if start and end else None,
    }


def _pinned(run: Mapping[str, Any], target: er.SideTarget) -> str | None:
    pinned = (run.get("status") or {}).get("pinned") or {}
    if target.kind == "Topology":
        return pinned.get("topology")
    return (pinned.get("agents") or {}).get(target.name)


def _case_trial(
    ctx: _Ctx, case: EvalCase, side: er.Side, target: er.SideTarget, trial: int, progress: _Progress
) -> Trial:
    """One trial of a case on a side: its Run made if missing, graded once it finished."""
    rname = er.run_name(ctx.name, "case", side, case.name, trial)
    run = ctx.runs.get(rname)
    if run is None:
        progress.create.append(
            er.case_run(
                ctx.namespace,
                ctx.name,
                ctx.uid,
                ctx.spec,
                "case",
                side,
                case.name,
                trial,
                {**target.ref(), "version": target.version},
                case.input,
                read_only=er.RECORDED_TAG in case.tags,
                replay=case.replay,
            )
        )
        return Trial(rname)
    foreign = ctx.foreign_run(run)
    if foreign is not None:
        return Trial(rname, grade=errored(foreign))
    done = _finished(run)
    if done is None:
        progress.active += 1
        return Trial(rname)
    version = _pinned(run, target)
    found = {"run": rname, "version": version, **_spent(run, progress)}
    status = run.get("status") or {}
    if done[0] != "True":
        return Trial(grade=errored(f"Run {rname} {done[1]}: {done[2]}"), **found)
    if version != target.version:
        why = f"Run {rname} pinned {target.label} at {version}, not {target.version}"
        return Trial(grade=errored(f"{REASON_VERSION_UNAVAILABLE}: {why}"), **found)
    output = str(status.get("output") or "")
    if status.get("outputTruncated"):
        return Trial(grade=errored(f"Run {rname}'s output was truncated: not graded"), **found)
    if case.grader.type not in MODEL_GRADERS:
        return Trial(grade=grade(case.grader, output), **found)
    return _judged(ctx, case, side, trial, output, found, progress)


def _judged(
    ctx: _Ctx,
    case: EvalCase,
    side: er.Side,
    trial: int,
    output: str,
    found: dict[str, Any],
    progress: _Progress,
) -> Trial:
    """A case trial whose grader is a model: its judge Run made, then read."""
    jname = er.run_name(ctx.name, "judge", side, case.name, trial)
    judge = ctx.runs.get(jname)
    if judge is None:
        assert case.grader.agent is not None
        progress.create.insert(
            0,  # judges first: they finish cases already paid for
            er.case_run(
                ctx.namespace,
                ctx.name,
                ctx.uid,
                ctx.spec,
                "judge",
                side,
                case.name,
                trial,
                {"agentRef": {"name": case.grader.agent}},
                judge_input(case.grader, case.input, output),
            ),
        )
        return Trial(judge_run=jname, **found)
    foreign = ctx.foreign_run(judge)
    if foreign is not None:
        return Trial(grade=errored(foreign), judge_run=jname, **found)
    done = _finished(judge)
    if done is None:
        progress.active += 1
        return Trial(judge_run=jname, **found)
    spent = _spent(judge, progress)
    if found["cost_micros"] is not None and spent["cost_micros"] is not None:
        found["cost_micros"] += spent["cost_micros"]
    found["cost_unknown"] = found["cost_unknown"] or spent["cost_unknown"]
    graded: Grade
    if done[0] != "True":
        graded = errored(f"judge Run {jname} {done[1]}: {done[2]}")
    else:
        graded = grade_judge(case.grader, str((judge.get("status") or {}).get("output") or ""))
    return Trial(grade=graded, judge_run=jname, **found)


def _graded_before(status: Mapping[str, Any]) -> dict[tuple[str, str], SideResult]:
    """The side results this EvalRun's status already shows as graded (kept when their
    Runs are deleted meanwhile, e.g. by the Workspace's Run TTL: never run twice)."""
    out: dict[tuple[str, str], SideResult] = {}
    for case in status.get("cases") or ():
        for side in ("candidate", "baseline"):
            result = case.get(side) if isinstance(case, dict) else None
            if isinstance(result, dict) and result.get("outcome") in (
                "Passed",
                "Failed",
                "Errored",
            ):
                out[(side, str(case.get("name")))] = SideResult.model_validate(result)
    return out


def _progress(
    ctx: _Ctx, started: Started, cache: Any, before: Mapping[tuple[str, str], SideResult]
) -> _Progress:
    """Every trial of every case on every side (module docstring, step 2)."""
    progress = _Progress({s: {} for s in started.targets}, {}, {}, [])
    for case in started.cases:
        n = er.trials_of(case, ctx.spec)
        for side, target in started.targets.items():
            key = er.cache_key(case, target, n)
            progress.keys[(side, case.name)] = key
            names = [er.run_name(ctx.name, "case", side, case.name, t) for t in range(n)]
            graded = before.get((side, case.name))
            if graded is not None and not all(r in ctx.runs for r in graded.runs or names):
                progress.cached[(side, case.name)] = graded
                continue
            hit = cache(key) if ctx.spec.reuse_results else None
            if hit is not None and not any(r in ctx.runs for r in names):
                progress.cached[(side, case.name)] = SideResult.model_validate(hit).model_copy(
                    update={"cached": True}
                )
                continue
            progress.trials[side][case.name] = [
                _case_trial(ctx, case, side, target, t, progress) for t in range(n)
            ]
    return progress


def _calibrate(
    ctx: _Ctx, cases: tuple[EvalCase, ...], progress: _Progress
) -> tuple[dict[tuple[str, int], Grade], int]:
    """The judges' grades of the human-labelled answers read so far, and how many are not
    (their Runs made first: the gate they feed decides whether the rest means anything)."""
    grades: dict[tuple[str, int], Grade] = {}
    missing = []
    items = cal.labelled(cases)
    for item in items:
        run = ctx.runs.get(cal.run_name(ctx.name, item))
        foreign = ctx.foreign_run(run) if run is not None else None
        done = _finished(run) if run is not None and foreign is None else None
        if run is None:
            missing.append(cal.calibration_run(ctx.namespace, ctx.name, ctx.uid, ctx.spec, item))
        elif foreign is not None:  # not provably its own: never read as the judge's grade
            grades[(item.case, item.index)] = errored(foreign)
        elif done is None:
            progress.active += 1
        else:
            _spent(run, progress)
            output = str((run.get("status") or {}).get("output") or "")
            grades[(item.case, item.index)] = (
                grade_judge(item.grader, output)
                if done[0] == "True"
                else errored(f"calibration Run {run.get('name')} {done[1]}: {done[2]}")
            )
    progress.create[:0] = missing
    return grades, len(items) - len(grades)


async def _create_runs(
    ctx: _Ctx, progress: _Progress, live: Callable[[str], bool]
) -> dict[str, dict[str, Any]]:
    """Create the missing Runs, at most ``parallelism`` unfinished at once, each one's uid
    remembered until the status records it. A name already taken is never taken as a Run
    made: the Run found there (not in the index: unlabelled, or not seen yet) is returned,
    to be checked like every other one, unless it is a deleted EvalRun's (``live``: whether
    an EvalRun of a uid exists), which is waited for."""
    room = max(0, ctx.spec.parallelism - progress.active)
    found: dict[str, dict[str, Any]] = {}
    for manifest in progress.create[:room]:
        name = str(manifest["metadata"]["name"])
        made = await k8s.create_custom_if_absent("runs", ctx.namespace, manifest)
        if made is not None:
            uid = str((made.get("metadata") or {}).get("uid") or "")
            ctx.ledger.remember(ctx.owner, "Run", name, uid)
            continue
        there = await k8s.get_custom("runs", ctx.namespace, name)
        entry = _run_entry(there) if there is not None else None
        if entry is not None and not er.orphaned(entry, ctx.uid, live):
            found[name] = entry
    return found


#: What the trials came to: the context, the progress, the judges' grades of the labelled
#: answers and how many of those are still to come.
_Cases = tuple[_Ctx, _Progress, dict[tuple[str, int], Grade], int]


async def _run_cases(
    ctl: Controller,
    view: Mapping[str, Any],
    spec: EvalRunSpec,
    started: Started,
    owner: Target,
    ledger: Ledger,
) -> _Cases:
    """Every trial checked, graded or made (module docstring, step 3), the calibration Runs
    first. A Run found where
    one was to be created is checked at once, like the indexed ones."""
    namespace, name = owner.namespace, owner.name
    recorded = view["status"].get("createdUids") or {}  # the ledger holds what is newer
    before = _graded_before(view["status"])

    def cache(key: str) -> Any:
        return ctl.lookup(IndexId.EVAL_RESULTS, (namespace, key))

    def live(uid: str) -> bool:
        return ctl.lookup(IndexId.EVALRUN_UIDS, uid) is not None

    indexed = ctl.lookup_all(IndexId.EVAL_CASE_RUNS, (namespace, name))
    # A deleted predecessor's Runs under the planned names: neither checked nor created
    # over until the garbage collector has deleted them (their trials wait).
    gone = {str(r["name"]) for r in indexed if er.orphaned(r, owner.uid, live)}

    def progress_of(runs: Mapping[str, Mapping[str, Any]]) -> _Cases:
        made = ledger.proof(owner, recorded, parse_time(view.get("created")))
        ctx = _Ctx(namespace, name, owner.uid, spec, runs, owner, ledger, made, {})
        progress = _progress(ctx, started, cache, before)
        labels_graded, calibrating = _calibrate(ctx, started.cases, progress)
        progress.create[:] = [m for m in progress.create if m["metadata"]["name"] not in gone]
        return ctx, progress, labels_graded, calibrating

    runs = {str(r["name"]): r for r in indexed if str(r["name"]) not in gone}
    cases = progress_of(runs)
    found = await _create_runs(cases[0], cases[1], live)
    return progress_of({**runs, **found}) if found else cases


def _ledger(ctl: Controller) -> Ledger:
    """The operator's one ledger (:func:`~..workload.resolve.ledger_of`)."""
    return ledger_of(ctl.services.resolver)


# --- EvalRun: its SpendQuota reservation -------------------------------------------------------


def _workspace_of(ctl: Controller, namespace: str, spec: RunSpec) -> WorkspaceSpec:
    """The Workspace a planned Run of ``spec`` runs in (its target's)."""
    if spec.topology_ref is not None:
        found = ctl.lookup(IndexId.TOPOLOGY_VIEWS, (namespace, spec.topology_ref.name)) or {}
        ws = str(((found.get("spec") or {}).get("workspaceRef") or {}).get("name"))
    else:
        assert spec.agent_ref is not None
        found = ctl.lookup(IndexId.AGENT_VIEWS, (namespace, spec.agent_ref.name)) or {}
        ws = workspace_name(found.get("spec") or {})
    raw = ctl.lookup(IndexId.WORKSPACE_VIEWS, (namespace, ws)) or {}
    return WorkspaceSpec.model_validate(raw.get("spec") or {})


def _worst_case(
    ctl: Controller, namespace: str, planned: list[dict[str, Any]]
) -> tuple[quota.Cap, list[RunSpec]]:
    """The sum of the planned Runs' caps (unknown when one of them is), and their specs."""
    specs = [RunSpec.model_validate(r["spec"]) for r in planned]
    caps = [quota.run_cap(s, _workspace_of(ctl, namespace, s)) for s in specs]
    costs = [c.cost for c in caps]
    total = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
    currency = next((c.currency for c in caps if c.currency), None)
    return quota.Cap(total, sum(c.tokens for c in caps), currency), specs


async def _reserve(
    ctl: Controller, namespace: str, name: str, view: Mapping[str, Any], started: Started
) -> list[str] | Verdict:
    """Reserve the EvalRun's worst case once, before its first Run: the SpendQuotas holding
    it, or why it cannot start (a quota's reason). Its Runs then reserve nothing of their
    own (:mod:`swarmkit_operator.runs.budget`); :func:`_settle` books what they spent."""
    status = _status_of(ctl, name, namespace, view)
    if "spendReservations" in status:
        return list(status["spendReservations"])
    spec = EvalRunSpec.model_validate(view["spec"])
    planned = er.planned_runs(namespace, name, view["uid"], spec, started.cases, started.targets)
    planned += [
        cal.calibration_run(namespace, name, view["uid"], spec, item)
        for item in cal.labelled(started.cases)
    ]
    cap, specs = _worst_case(ctl, namespace, planned)
    names: set[str] = set()
    for target in {
        json.dumps(s.model_dump(include={"agent_ref", "topology_ref"})): s for s in specs
    }.values():
        names.update(await spend.covering(namespace, target))
    reservations = sorted(names)
    who = er.eval_run_spender(label_value(name))
    refusal = await spend.reserve_cap(namespace, reservations, who, view["uid"], cap)
    if refusal is None:
        return reservations
    if refusal.verdict.final:
        return Verdict(SUCCEEDED, "False", refusal.verdict.reason, refusal.verdict.message)
    # Waiting, or a hold (an EvalRun opens no spend Review: it waits too), looked at again.
    if refusal.hold:
        message = f"{refusal.message}; waits until it fits"
        return Verdict(SUCCEEDED, "Unknown", REASON_BUDGET_EXHAUSTED, message)
    return Verdict(SUCCEEDED, "Unknown", refusal.verdict.reason, refusal.verdict.message)


async def _settle(ctl: Controller, namespace: str, name: str, view: Mapping[str, Any]) -> None:
    """Book what the finished EvalRun's own Runs (their uids in its ``createdUids``) spent
    against its reservation, once each of them has finished (each one's end enqueues the
    EvalRun again). A Run labelled as its own that it did not create counts for nothing
    here: it reserved its own cap (:mod:`swarmkit_operator.runs.budget`)."""
    names = list(view["status"].get("spendReservations") or [])
    if not names:
        return
    recorded = dict(view["status"].get("createdUids") or {})
    runs = er.own_runs(ctl.lookup_all(IndexId.EVAL_CASE_RUNS, (namespace, name)), recorded)
    if any(_finished(r) is None for r in runs):
        return
    if len(runs) < sum(k.startswith("Run/") for k in recorded):
        # A Run it created is gone (e.g. its TTL): what it spent is unknown, the reserved
        # worst case stays booked.
        await spend.settle_spent(namespace, names, view["uid"], None, None)
        return
    cost, tokens = er.spent(runs)
    await spend.settle_spent(namespace, names, view["uid"], cost, tokens)


# --- EvalRun: status ---------------------------------------------------------------------------


def _fields(started: Started, ev: Evaluated, currency: str | None) -> dict[str, Any]:
    fields: dict[str, Any] = dict(started.fields)
    for side, summary in (("candidate", ev.candidate), ("baseline", ev.baseline)):
        if summary is not None:
            pinned = started.targets[side].version  # type: ignore[index]
            fields[side] = summary.model_copy(update={"version": pinned}).wire()
    if ev.comparison is not None:
        fields["comparison"] = ev.comparison.wire()
    fields.update(
        regressed=list(ev.regressed),
        fixed=list(ev.fixed),
        flaky=list(ev.flaky),
        errored=list(ev.errored),
        cases=[c.wire() for c in ev.cases],
        judges=[j.wire() for j in ev.judges],
    )
    if ev.total_cost_micros is not None:
        fields["totalCost"] = format_money(ev.total_cost_micros)
        fields["currency"] = currency
    if ev.verdict:
        fields.update(
            verdict=ev.verdict,
            verdictReason=ev.reason,
            completionTime=rfc3339(datetime.now(UTC)),
        )
    return fields


def _condition(ev: Evaluated) -> Verdict:
    if ev.verdict:
        return Verdict(SUCCEEDED, "True", ev.condition_reason, f"{ev.verdict}: {ev.reason}")
    total = len(ev.cases)
    return Verdict(
        SUCCEEDED, "Unknown", REASON_RUNNING, f"{total - ev.pending}/{total} case(s) graded"
    )


async def reconcile_evalrun(ctl: Controller, namespace: str, name: str, force: bool) -> str:
    view = ctl.lookup(IndexId.EVALRUN_VIEWS, (namespace, name))
    if view is None:
        return "gone"
    evalset = str((view["spec"].get("evalSetRef") or {}).get("name"))
    owner, ledger = er.target(namespace, name, view["uid"]), _ledger(ctl)
    if view["status"].get("completionTime"):
        metrics.record_evaluation(namespace, evalset, view["status"])
        ledger.forget(owner.uid)  # its final write recorded every Run it created
        await _settle(ctl, namespace, name, view)
        return "finished"

    async def write(fields: Mapping[str, Any], verdict: Verdict) -> bool:
        # Every write carries the record (a field left out of an apply is removed); the
        # ledger keeps each uid until the watch shows it (the Runs' gate reads the index).
        recorded = view["status"].get("createdUids") or {}
        uids = ledger.recorded(owner, recorded)
        return await ctl.write_status(
            StatusOf.of_view("EvalRun", namespace, name, view),
            {**fields, "createdUids": uids} if uids else fields,
            [verdict],
        )

    try:
        spec = EvalRunSpec.model_validate(view["spec"])
    except ValidationError as exc:
        final = {"completionTime": rfc3339(datetime.now(UTC))}
        await write(final, Verdict(SUCCEEDED, "False", REASON_INVALID, str(exc)[:1000]))
        return "invalid"
    started = await _start(ctl, namespace, name, view, spec)
    if isinstance(started, Verdict):
        final = {"completionTime": rfc3339(datetime.now(UTC))} if started.status == "False" else {}
        await write(final, started)
        if started.status == "Unknown":
            ctl.enqueue("EvalRun", namespace, name, delay=WAIT_RECHECK)
        return "waiting"
    reserved = await _reserve(ctl, namespace, name, view, started)
    if isinstance(reserved, Verdict):
        final = {"completionTime": rfc3339(datetime.now(UTC))} if reserved.status == "False" else {}
        await write({**started.fields, **final}, reserved)
        if reserved.status == "Unknown":
            ctl.enqueue("EvalRun", namespace, name, delay=WAIT_RECHECK)
        return "waiting"
    started = replace(started, fields={**started.fields, "spendReservations": reserved})
    ctx, progress, labels_graded, calibrating = await _run_cases(
        ctl, view, spec, started, owner, ledger
    )
    for why in ctx.foreign.values():
        involved = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "EvalRun", "uid": owner.uid}
        involved.update(name=name, namespace=namespace)
        ctl.post_event(involved, "Warning", REASON_TAMPERED_OBJECT, why)
    infos = [CaseInfo(c.name, c.weight, c.grader.type, c.critical) for c in started.cases]
    evaluated = evaluate(
        infos,
        progress.trials,
        {c.name: er.trials_of(c, spec) for c in started.cases},
        {side: t.label for side, t in started.targets.items()},
        spec.criteria,
        spec.seed,
        progress.keys,
        progress.cached,
        _judges_now(ctl, namespace, started.cases, labels_graded),
        calibrating,
    )
    fields = _fields(started, evaluated, progress.currency)
    written = await write(fields, _condition(evaluated))
    if written and evaluated.verdict:
        metrics.EVAL_RUNS.labels(namespace, evalset, evaluated.verdict).inc()
        metrics.record_evaluation(namespace, evalset, fields)
        # Settled now: the write of a verdict enqueues no further reconcile by itself.
        await _settle(ctl, namespace, name, {**view, "status": {**view["status"], **fields}})
    return "changed" if written else "unchanged"


def _judges_now(
    ctl: Controller,
    namespace: str,
    cases: Sequence[EvalCase],
    labels_graded: Mapping[tuple[str, int], Grade],
) -> list[JudgeCalibration]:
    """Each judge's calibration: its labels as graded so far, and people's Funnel decisions
    on what its skill judged (a judgeSkill judge), as recorded now."""
    funnels = funnel_agreements(ctl, namespace, cal.judge_skills(cases))
    return cal.calibrations(cases, labels_graded, funnels)


def evalrun_dependents_view(view: dict[str, Any] | None) -> Any:
    """What its EvalSet reads of an EvalRun: the judges' calibration, once finished."""
    if view is None:
        return MISSING
    ref = (view["spec"].get("evalSetRef") or {}).get("name")
    return (ref, view["status"].get("completionTime"), True)


def evalrun_dependents(
    ctl: Controller, namespace: str, name: str, seen: Observation, body: Mapping[str, Any]
) -> None:
    """A finished (or deleted) EvalRun: its EvalSet shows the newest calibration."""
    if seen.changed:
        for view in (seen.view, seen.previous):
            if isinstance(view, tuple) and view[0] and view[1]:
                ctl.enqueue("EvalSet", namespace, str(view[0]))


EVAL_RUN_KIND = Kind(
    "EvalRun",
    priority=3,  # after the Agents and Topologies it runs
    reconcile=reconcile_evalrun,
    api=EVAL_RUN,
    indexes=(evalrun_views, evalrun_uids, evalrun_by_set, eval_results, evalset_calibrations),
    dependents_view=evalrun_dependents_view,
    dependents=evalrun_dependents,
    # The EvalSet it runs: an unfinished EvalRun waits for it to be Ready.
    watches=(Watch("EvalSet", IndexId.EVALRUN_BY_SET),),
)
