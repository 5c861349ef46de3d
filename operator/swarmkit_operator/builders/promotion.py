"""Promotion gated on evaluation (``spec.promotion``), pure: the render a Topology version
runs with, and the next ``status.promotion`` with its ``Promoted`` verdict.

A promoted version must stay runnable after the spec moved on, so each version of an object
with ``spec.promotion`` is kept as immutable renders (:mod:`swarmkit_api.promotion`):

* an Agent's version already is one (``agent-<name>-<hash8>``, pinning its skills'
  renders): :class:`Version` names it and its skills' ConfigMaps as pins;
* a Topology's version is a validated graph over its live spec, so this module renders it
  (``topology-<name>-<hash8>``, :func:`topology_render`): the spec, and the agents (their
  rendered ConfigMaps) and funnels at the versions the topology was made Ready with. The
  Resolver runs the active version from there (:mod:`swarmkit_operator.workload.resolve`).

:func:`decide` is the state machine: the first version is active at once; a new one is the
candidate, evaluated by one EvalRun per EvalSet against the active version; every EvalRun
``Pass`` promotes it, any ``Fail`` leaves it with ``Promoted=False`` naming the regressions
(until the spec changes: a new version is a new candidate), ``Inconclusive`` holds it or asks a
person (``onInconclusive: review``), except when a judge was not calibrated: then the gate is
``Unknown`` until it is (:func:`recalibrations`: a calibration change evaluates the candidate
again by itself, once per change); a forced promotion (``kubectl swarmkit promote --force``,
admission-checked) promotes the candidate it names and says who.

Only the EvalRuns the operator created count (:func:`counted_eval_runs`: their uids are
recorded in ``status.promotion.createdUids``); one under a planned name that is not is
``TamperedObject`` and holds the candidate. Each version carries its render's content
digest, which the Resolver checks the render against when it runs it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import yaml

from swarmkit_api.conditions import (
    PROMOTED,
    READY,
    REASON_AWAITING_REVIEW,
    REASON_EVAL_SET_NOT_FOUND,
    REASON_EVALUATING,
    REASON_EVALUATION_FAILED,
    REASON_FORCED,
    REASON_INCONCLUSIVE,
    REASON_JUDGE_UNCALIBRATED,
    REASON_PROMOTED,
    REASON_REJECTED,
    REASON_TAMPERED_OBJECT,
    REASON_TOO_FEW_LABELS,
    REASON_WAITING,
    SUCCEEDED,
)
from swarmkit_api.names import dns_label
from swarmkit_api.promotion import (
    HISTORY_LIMIT,
    PROMOTION_LABEL,
    VERDICT_FAIL,
    VERDICT_INCONCLUSIVE,
    VERDICT_PASS,
    CandidateVersion,
    PromotedVersion,
    PromotionGate,
    PromotionSpec,
    PromotionStatus,
)
from swarmkit_api.resources import GROUP, VERSION
from swarmkit_api.review import REVIEW_KIND_LABEL

from ..conditions import Status, get_condition
from . import (
    MANAGED_BY,
    ObjectRef,
    Verdict,
    content_digest,
    dump_json,
    dump_yaml,
    owner_reference,
    rendered_config_map,
    trust,
)
from .workload import Target

#: Keys of a Topology's render.
TOPOLOGY_YAML = "topology.yaml"
PINNED_JSON = "pinned.json"
#: Regressions named in the Promoted message at most (status.promotion lists them all).
MESSAGE_REGRESSIONS = 10


@dataclass(frozen=True)
class Version:
    """One version of the object and the renders that pin it (``sha256``: its render's
    content digest, what the one reading it back checks it against)."""

    version: str
    config_map: str
    pins: tuple[str, ...] = ()
    sha256: str | None = None


@dataclass(frozen=True)
class PinnedAgentRender:
    """An agent as a Topology version runs it: its version and rendered ConfigMaps."""

    version: str
    config_map: str
    skill_config_maps: tuple[str, ...] = ()
    #: The agent render's content digest (its Agent's status recorded it), when known.
    sha256: str | None = None


def topology_render(
    owner: ObjectRef,
    version: str,
    spec: Mapping[str, Any],
    agents: Mapping[str, PinnedAgentRender],
    funnels: Mapping[str, Mapping[str, Any]],
    funnel_versions: Mapping[str, str],
    children: Sequence[str],
) -> tuple[dict[str, Any], Version]:
    """The immutable render of a Topology version, and the :class:`Version` naming it (its
    pins: every agent's and skill's render it runs with)."""
    pinned = {
        "version": version,
        "agents": {
            name: {
                "version": a.version,
                "renderedConfigMap": a.config_map,
                **({"renderedSha256": a.sha256} if a.sha256 else {}),
            }
            for name, a in sorted(agents.items())
        },
        "funnels": {name: dict(funnels[name]) for name in sorted(funnels)},
        "funnelVersions": dict(sorted(funnel_versions.items())),
        "childTopologies": list(children),
    }
    data = {TOPOLOGY_YAML: dump_yaml(dict(spec)), PINNED_JSON: dump_json(pinned)}
    digest = content_digest(data)
    manifest = rendered_config_map(owner, digest, data)
    pins = sorted({p for a in agents.values() for p in (a.config_map, *a.skill_config_maps) if p})
    return manifest, Version(version, manifest["metadata"]["name"], tuple(pins), digest)


@dataclass(frozen=True)
class TopologyPins:
    """A Topology version's render read back (:func:`read_topology_render`)."""

    version: str
    spec: Mapping[str, Any]
    agents: Mapping[str, PinnedAgentRender]
    funnels: Mapping[str, Mapping[str, Any]]
    children: tuple[str, ...]


def read_topology_render(data: Mapping[str, str]) -> TopologyPins:
    """What :func:`topology_render` wrote."""
    spec = yaml.safe_load(data[TOPOLOGY_YAML]) or {}
    pinned: dict[str, Any] = json.loads(data[PINNED_JSON])
    agents = {
        str(n): PinnedAgentRender(
            str(a["version"]),
            str(a["renderedConfigMap"]),
            sha256=str(a["renderedSha256"]) if a.get("renderedSha256") else None,
        )
        for n, a in (pinned.get("agents") or {}).items()
    }
    return TopologyPins(
        version=str(pinned["version"]),
        spec=spec,
        agents=agents,
        funnels={str(k): dict(v) for k, v in (pinned.get("funnels") or {}).items()},
        children=tuple(str(c) for c in pinned.get("childTopologies") or ()),
    )


@dataclass(frozen=True)
class EvalOutcome:
    """One EvalRun of a candidate, as its status shows it."""

    name: str
    eval_set: str
    verdict: str | None = None
    regressions: tuple[str, ...] = ()
    #: Its ``Succeeded`` reason once it has a verdict (``JudgeUncalibrated``, ...).
    cause: str | None = None
    #: Its ``verdictReason``: why that verdict.
    why: str = ""


#: The EvalRun reasons of an Inconclusive verdict that only say a judge is not calibrated.
JUDGE_REASONS = (REASON_JUDGE_UNCALIBRATED, REASON_TOO_FEW_LABELS)


def waits_for_judge(outcome: EvalOutcome) -> bool:
    """Inconclusive only because a judge is not trusted to decide yet."""
    return outcome.verdict == VERDICT_INCONCLUSIVE and outcome.cause in JUDGE_REASONS


@dataclass(frozen=True)
class Force:
    """A forced promotion (the annotations ``kubectl swarmkit promote --force`` wrote)."""

    version: str
    by: str


@dataclass(frozen=True)
class PromotionInputs:
    """What :func:`decide` looks at."""

    spec: PromotionSpec
    #: The object's current version, when it is Ready (else None: nothing to evaluate).
    current: Version | None
    previous: PromotionStatus | None
    now: datetime
    #: EvalSet name → the EvalRun of the current candidate on it (absent: not started).
    eval_runs: Mapping[str, EvalOutcome] = field(default_factory=dict)
    #: EvalSets of ``spec.evalSets`` that do not exist.
    missing_eval_sets: tuple[str, ...] = ()
    #: The verdict of the candidate's Review (``approve`` / ``reject``), once decided.
    review_verdict: str | None = None
    #: The name the candidate's Review gets (when ``onInconclusive: review`` asks for one).
    review_name: str = ""
    force: Force | None = None
    #: Why an object under a planned EvalRun name is not the one the operator created
    #: (:func:`counted_eval_runs`): never counted, and the candidate is not promoted.
    tampered: tuple[str, ...] = ()


@dataclass(frozen=True)
class PromotionPlan:
    """The next ``status.promotion``, its verdict, and what to start for it."""

    status: PromotionStatus
    verdict: Verdict
    #: EvalSets whose EvalRun of the candidate must be created.
    start_eval_sets: tuple[str, ...] = ()
    #: Open the candidate's Review (Inconclusive with ``onInconclusive: review``).
    open_review: bool = False

    def status_field(self) -> dict[str, Any]:
        return self.status.model_dump(by_alias=True, exclude_none=True, mode="json")


def _promoted(
    version: Version, now: datetime, by: str | None = None, runs: Sequence[str] = ()
) -> PromotedVersion:
    return PromotedVersion(
        version=version.version,
        rendered_config_map=version.config_map,
        rendered_sha256=version.sha256,
        pins=list(version.pins),
        promoted_at=now,
        forced_by=by,
        eval_runs=list(runs),
    )


def _history(previous: PromotionStatus | None) -> list[PromotedVersion]:
    if previous is None or previous.active is None:
        return list(previous.history if previous else ())
    return [previous.active, *previous.history][:HISTORY_LIMIT]


def _promote(
    inp: PromotionInputs,
    cur: Version,
    reason: str,
    message: str,
    by: str | None = None,
    runs: Sequence[str] = (),
) -> PromotionPlan:
    active = _promoted(cur, inp.now, by, runs)
    status = PromotionStatus(active=active, history=_history(inp.previous))
    return PromotionPlan(status, Verdict(PROMOTED, "True", reason, message))


def decide(inp: PromotionInputs) -> PromotionPlan:
    """The next promotion state of an object with ``spec.promotion``."""
    prev = inp.previous or PromotionStatus()
    cur = inp.current
    active = prev.active
    if cur is None:
        # Not Ready: nothing new to evaluate; the active version goes on serving.
        kept = PromotionStatus(active=active, candidate=prev.candidate, history=prev.history)
        why = "the current version is not Ready: the active version goes on serving"
        return PromotionPlan(kept, Verdict(PROMOTED, "Unknown", REASON_WAITING, why))
    if active is None:
        return _promote(inp, cur, REASON_PROMOTED, f"version {cur.version} is the first one")
    if active.version == cur.version:
        # Promoted already; keep its record (a render of the same version may be renamed
        # by a spec edit that does not re-version it, e.g. spec.promotion itself).
        same = active.model_copy(
            update={
                "rendered_config_map": cur.config_map,
                "rendered_sha256": cur.sha256,
                "pins": list(cur.pins),
            }
        )
        status = PromotionStatus(active=same, history=prev.history)
        reason = REASON_FORCED if active.forced_by else REASON_PROMOTED
        how = f" (forced by {active.forced_by})" if active.forced_by else ""
        return PromotionPlan(
            status, Verdict(PROMOTED, "True", reason, f"version {cur.version} is active{how}")
        )
    if inp.force is not None and inp.force.version == cur.version:
        runs = prev.candidate.eval_runs if prev.candidate else []
        message = (
            f"version {cur.version} forced past its evaluation by {inp.force.by} "
            f"(was {active.version})"
        )
        return _promote(inp, cur, REASON_FORCED, message, by=inp.force.by, runs=runs)
    return _candidate(inp, cur, active, prev)


def _candidate(
    inp: PromotionInputs, cur: Version, active: PromotedVersion, prev: PromotionStatus
) -> PromotionPlan:
    names = [e.name for e in inp.spec.eval_sets]
    runs = [inp.eval_runs[n] for n in names if n in inp.eval_runs]
    verdicts = [r.verdict for r in runs]
    start = tuple(n for n in names if n not in inp.eval_runs)
    regressions = [f"{r.eval_set}/{case}" for r in runs for case in r.regressions]
    run_names = [r.name for r in runs]
    verdict: Literal["Pass", "Fail", "Inconclusive"] | None
    if VERDICT_FAIL in verdicts:
        verdict = "Fail"
    elif start or None in verdicts:
        verdict = None
    elif all(v == VERDICT_PASS for v in verdicts):
        verdict = "Pass"
    else:
        verdict = "Inconclusive"
    # A person approving does not make a judge trustworthy: while one is not, the gate
    # waits for its calibration (Unknown), whatever onInconclusive says.
    judged = [r for r in runs if waits_for_judge(r)] if verdict == "Inconclusive" else []
    review = not judged and verdict == "Inconclusive" and inp.spec.gate.on_inconclusive == "review"
    candidate = CandidateVersion(
        version=cur.version,
        rendered_config_map=cur.config_map,
        rendered_sha256=cur.sha256,
        pins=list(cur.pins),
        eval_runs=run_names,
        verdict=verdict,
        regressions=regressions,
        review=inp.review_name if review else None,
    )
    keep = PromotionStatus(active=active, candidate=candidate, history=prev.history)
    against = f"candidate {cur.version} against active {active.version}"

    def plan(status: Status, reason: str, message: str, **kw: Any) -> PromotionPlan:
        return PromotionPlan(keep, Verdict(PROMOTED, status, reason, message), **kw)

    if inp.tampered:
        return plan("False", REASON_TAMPERED_OBJECT, f"{against}: {'; '.join(inp.tampered)}")
    if inp.missing_eval_sets:
        missing = ", ".join(inp.missing_eval_sets)
        return plan(
            "False", REASON_EVAL_SET_NOT_FOUND, f"{against}: EvalSet(s) not found: {missing}"
        )
    if verdict == "Fail":
        failed = ", ".join(r.name for r in runs if r.verdict == VERDICT_FAIL)
        named = ", ".join(regressions[:MESSAGE_REGRESSIONS]) or "none by name"
        more = len(regressions) - MESSAGE_REGRESSIONS
        named += f" and {more} more" if more > 0 else ""
        message = f"{against} failed its evaluation ({failed}): regressions: {named}"
        return plan("False", REASON_EVALUATION_FAILED, message)
    if verdict is None:
        running = ", ".join(r.name for r in runs if r.verdict is None) or "starting"
        message = f"{against}: evaluating (EvalRun(s) {running})"
        return plan("Unknown", REASON_EVALUATING, message, start_eval_sets=start)
    if verdict == "Pass":
        message = f"version {cur.version} passed its evaluation ({', '.join(run_names)})"
        return _promote(inp, cur, REASON_PROMOTED, message, runs=run_names)
    if judged:
        first = judged[0]
        message = (
            f"{against}: waiting for a calibrated judge (EvalRun {first.name}, EvalSet "
            f"{first.eval_set}: {first.why}); it is evaluated again when the calibration changes"
        )
        return plan("Unknown", str(first.cause), message)
    if not review:
        return plan("False", REASON_INCONCLUSIVE, f"{against} was inconclusive: held")
    if inp.review_verdict == "approve":
        message = f"version {cur.version} was inconclusive; approved in Review {inp.review_name}"
        return _promote(inp, cur, REASON_PROMOTED, message, runs=run_names)
    if inp.review_verdict == "reject":
        message = f"{against} was inconclusive; rejected in Review {inp.review_name}"
        return plan("False", REASON_REJECTED, message)
    message = f"{against} was inconclusive: Review {inp.review_name} decides"
    return plan("Unknown", REASON_AWAITING_REVIEW, message, open_review=True)


def eval_run_name(kind: str, name: str, version: str, eval_set: str, calibration: str = "") -> str:
    """``<kind>-<name>-<evalset>-<version8>``: one EvalRun per candidate version and EvalSet;
    ``-k<token>`` after it for a re-evaluation under changed calibration
    (:func:`recalibration`)."""
    suffix = f"-{version[:8]}" + (f"-k{calibration}" if calibration else "")
    return dns_label(f"{kind.lower()}-{name}-{eval_set}", suffix)


def review_name(kind: str, name: str, version: str) -> str:
    """``promote-<kind>-<name>-<version8>``: one Review per inconclusive candidate."""
    return dns_label(f"promote-{kind.lower()}-{name}", f"-{version[:8]}")


def promotion_label(kind: str, name: str) -> str:
    """The value of :data:`~swarmkit_api.promotion.PROMOTION_LABEL` for an object."""
    return dns_label(f"{kind.lower()}.{name}".replace(".", "-"))


def kept_renders(status: Mapping[str, Any]) -> set[str]:
    """The renders a ``status.promotion`` keeps from garbage collection: the active
    version's and the candidate's, with their pins."""
    promotion = status.get("promotion") or {}
    keep: set[str] = set()
    for side in ("active", "candidate"):
        entry = promotion.get(side) or {}
        keep.add(str(entry.get("renderedConfigMap") or ""))
        keep.update(str(p) for p in entry.get("pins") or ())
    keep.discard("")
    return keep


def active_of(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``status.promotion.active`` of a status dict, if any."""
    active = (status.get("promotion") or {}).get("active")
    return active if isinstance(active, Mapping) and active.get("renderedConfigMap") else None


def render_of(status: Mapping[str, Any], version: str | None) -> Mapping[str, Any] | None:
    """The promotion entry (active or candidate) of ``version``; the active one for None."""
    promotion = status.get("promotion") or {}
    if version is None:
        return active_of(status)
    for side in ("active", "candidate"):
        entry = promotion.get(side) or {}
        if entry.get("version") == version and entry.get("renderedConfigMap"):
            return entry
    return None


PROMOTION_REVIEW_KIND = "promotion"


def build_promotion_review(
    owner: ObjectRef, name: str, candidate: str, active: str, comparison: str
) -> dict[str, Any]:
    """The Review asking a person whether to promote an inconclusive candidate (owned by
    the Topology or Agent; one per candidate version). ``comparison`` is what the
    EvalRuns found, side by side."""
    question = (
        f"{owner.kind} {owner.name}: candidate version {candidate} was inconclusive against "
        f"active version {active}. Approve promotes it; reject leaves it unpromoted."
    )
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Review",
        "metadata": {
            "name": name,
            "namespace": owner.namespace,
            "labels": {
                **MANAGED_BY,
                PROMOTION_LABEL: promotion_label(owner.kind, owner.name),
                REVIEW_KIND_LABEL: PROMOTION_REVIEW_KIND,
            },
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": {
            "request": {
                "kind": PROMOTION_REVIEW_KIND,
                "question": question,
                "contentHash": candidate,
                "context": comparison[:4096],
            }
        },
    }


def comparison_text(outcomes: Sequence[Mapping[str, Any]]) -> str:
    """One line per EvalRun (:func:`eval_run_outcome`): its EvalSet, verdict and the two
    sides' summaries with their paired comparison, for a person deciding a promotion."""
    return "\n".join(
        f"{o['name']} (EvalSet {o['evalSet']}): {o.get('verdict')}; {dump_json(o['summary'])}"
        for o in outcomes
    )


_SUMMARY = ("verdictReason", "candidate", "baseline", "comparison", "regressed", "fixed", "flaky")


#: Label on a promotion's EvalRuns: the candidate version they evaluate.
CANDIDATE_LABEL = "swarmkit.dev/candidate-version"


def eval_run_manifest(
    owner: ObjectRef,
    eval_set: str,
    candidate: str,
    active: str,
    gate: PromotionGate,
    name: str | None = None,
) -> dict[str, Any]:
    """The EvalRun of ``owner``'s candidate version against its active one on ``eval_set``
    (owned by the Topology or Agent: deleting it deletes its evaluations), under its
    planned name (``name``: a re-evaluation's, :func:`counted_eval_runs`)."""
    ref = {"topologyRef" if owner.kind == "Topology" else "agentRef": {"name": owner.name}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "EvalRun",
        "metadata": {
            "name": name or eval_run_name(owner.kind, owner.name, candidate, eval_set),
            "namespace": owner.namespace,
            "labels": {
                **MANAGED_BY,
                PROMOTION_LABEL: promotion_label(owner.kind, owner.name),
                CANDIDATE_LABEL: candidate,
            },
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": {
            "evalSetRef": {"name": eval_set},
            "candidate": {**ref, "version": candidate},
            "baseline": {**ref, "version": active},
            "criteria": {
                "minCases": gate.min_cases,
                "nonInferiorityMargin": gate.non_inferiority_margin,
                "minPassRate": gate.min_pass_rate,
                "maxNewRegressions": gate.max_new_regressions,
            },
        },
    }


def eval_run_outcome(body: Mapping[str, Any]) -> dict[str, Any]:
    """What a promotion reads of one of its EvalRuns (an index entry): with what proves it
    the operator's (:func:`counted_eval_runs`), its uid, creation time and owners."""
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    meta = body.get("metadata") or {}
    return {
        "name": str(meta.get("name") or ""),
        "metadata": {
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "creationTimestamp": meta.get("creationTimestamp"),
            "ownerReferences": [dict(o) for o in meta.get("ownerReferences") or ()],
        },
        "evalSet": str((spec.get("evalSetRef") or {}).get("name") or ""),
        "version": str((spec.get("candidate") or {}).get("version") or ""),
        "verdict": status.get("verdict"),
        "regressions": [str(c) for c in status.get("regressed") or ()],
        "summary": {k: status[k] for k in _SUMMARY if k in status},
        # What a judge's calibration needs (recalibration): why the verdict, the EvalSet
        # version it was judged under, and the gates its uncalibrated judges missed.
        "cause": _succeeded_reason(status) if status.get("verdict") else None,
        "why": str(status.get("verdictReason") or "")[:1000],
        "evalSetVersion": status.get("evalSetVersion"),
        "uncalibrated": [
            {k: j.get(k) for k in ("judge", "minKappa", "minLabels")}
            for j in status.get("judges") or ()
            if isinstance(j, Mapping) and j.get("calibrated") is False
        ],
    }


def _succeeded_reason(status: Mapping[str, Any]) -> str | None:
    cond = get_condition(status.get("conditions"), SUCCEEDED)
    return str((cond or {}).get("reason") or "") or None


@dataclass(frozen=True)
class CalibrationInput:
    """What an EvalSet's judges are calibrated with now: its version (its spec holds the
    labels, the judges and their gates) and people's Funnel decisions on each judge skill
    (``status.funnelAgreement``: skill → decisions and kappa)."""

    version: str
    funnel: Mapping[str, tuple[int, float | None]] = field(default_factory=dict)


def calibration_input(view: Mapping[str, Any]) -> CalibrationInput | None:
    """An EvalSet view's :class:`CalibrationInput`; None until it is Ready at its current
    generation (its ``status.version`` may still be the previous spec's)."""
    status = view.get("status") or {}
    version = status.get("version")
    if not version or not view.get("ready") or view.get("observed") != view.get("generation"):
        return None
    funnel = {
        str(a["skill"]): (int(a.get("decisions") or 0), a.get("kappa"))
        for a in status.get("funnelAgreement") or ()
        if isinstance(a, Mapping) and a.get("skill")
    }
    return CalibrationInput(str(version), funnel)


def _funnel_clears(agreement: tuple[int, float | None] | None, gate: Mapping[str, Any]) -> bool:
    decisions, kappa = agreement if agreement is not None else (0, None)
    if kappa is None or gate.get("minKappa") is None:
        return False
    return decisions >= int(gate.get("minLabels") or 0) and kappa >= float(gate["minKappa"])


def recalibration(entry: Mapping[str, Any], now: CalibrationInput) -> str | None:
    """The token of the calibration an EvalRun (``entry``: :func:`eval_run_outcome`) that
    waits for a judge must be judged under again, or None when it is the one it was judged
    under: another EvalSet version (labels, judge or gate edited), or a judge skill it found
    uncalibrated whose Funnel decisions now clear that judge's gate. A pure function of what
    calibrates, not of the EvalSet's other status: an echo of it starts nothing."""
    cleared = sorted(
        {
            skill
            for j in entry.get("uncalibrated") or ()
            if (skill := str(j.get("judge") or "").partition("+Skill/")[2])
            and _funnel_clears(now.funnel.get(skill), j)
        }
    )
    if entry.get("evalSetVersion") == now.version and not cleared:
        return None
    return hashlib.sha256(dump_json([now.version, cleared]).encode()).hexdigest()[:8]


def promotion_target(owner: ObjectRef) -> Target:
    """The Topology or Agent as the creator of its candidates' EvalRuns: what the ledger
    and :func:`~.trust.check_made` key on (its own workload: a Topology also serves, an
    Agent runs a gateway, each with its own record)."""
    kind: Literal["Topology", "Agent"] = "Topology" if owner.kind == "Topology" else "Agent"
    return Target(kind, owner.namespace, owner.name, owner.uid, f"promote-{owner.name}")


@dataclass(frozen=True)
class Counted:
    """The EvalRuns of a candidate a promotion counts (:func:`counted_eval_runs`)."""

    #: EvalSet name → the outcome of the EvalRun the operator created for it.
    runs: Mapping[str, EvalOutcome]
    #: Why an EvalRun under a planned name is not counted (it is not the operator's).
    tampered: tuple[str, ...]
    #: (name, uid) of each counted EvalRun: what the promotion's record keeps.
    own: tuple[tuple[str, str], ...]
    #: EvalSet name → the re-evaluation to create: its judge's calibration changed.
    restart: Mapping[str, str] = field(default_factory=dict)


def counted_eval_runs(
    owner: ObjectRef,
    version: str,
    eval_sets: Sequence[str],
    entries: Sequence[Mapping[str, Any]],
    made: trust.Made,
    calibration: Mapping[str, CalibrationInput] | None = None,
) -> Counted:
    """The EvalRuns (``entries``: :func:`eval_run_outcome`, labelled for ``owner``) that
    count for candidate ``version``: for each EvalSet, the one under its planned name
    (:func:`eval_run_name`) that :func:`~.trust.check_made` proves the operator created for
    ``owner`` (its uid recorded in ``status.promotion.createdUids``, or remembered). The
    label, the planned name and a copied ownerReference prove nothing (anyone who may
    create EvalRuns writes them, with laxer criteria): such an EvalRun is never counted,
    and one under a planned name is named in ``tampered``. An EvalRun under another name
    is not the promotion's at all.

    One that waits for a judge whose calibration changed since (``calibration``: each
    EvalSet's now, :func:`recalibration`) is followed by the re-evaluation under the new
    one: counted once it exists (checked the same way), else to create (``restart``)."""
    by_name = {str(e.get("name")): e for e in entries}
    target = promotion_target(owner)
    runs: dict[str, EvalOutcome] = {}
    tampered: list[str] = []
    own: list[tuple[str, str]] = []
    restart: dict[str, str] = {}
    for eval_set in eval_sets:
        name, seen = eval_run_name(owner.kind, owner.name, version, eval_set), set()
        now = (calibration or {}).get(eval_set)
        while name not in seen:
            seen.add(name)
            entry = by_name.get(name)
            if entry is None:
                if len(seen) > 1:  # a re-evaluation not created yet
                    runs[eval_set], restart[eval_set] = EvalOutcome(name, eval_set), name
                break
            outcome = _own_outcome(entry, name, version, eval_set, target, made, tampered)
            if outcome is None:
                break
            own.append((name, outcome[1]))
            runs[eval_set] = outcome[0]
            token = recalibration(entry, now) if now and waits_for_judge(outcome[0]) else None
            if token is None:
                break
            name = eval_run_name(owner.kind, owner.name, version, eval_set, token)
    return Counted(runs, tuple(tampered), tuple(own), restart)


def _own_outcome(
    entry: Mapping[str, Any],
    name: str,
    version: str,
    eval_set: str,
    target: Target,
    made: trust.Made,
    tampered: list[str],
) -> tuple[EvalOutcome, str] | None:
    """The outcome and uid of the EvalRun under planned ``name`` if the operator created
    it for ``version`` on ``eval_set``; else None, and why in ``tampered``."""
    try:
        uid = trust.check_made("EvalRun", entry, target, made)
    except trust.Refused as exc:
        tampered.append(exc.message)
        return None
    if (entry.get("version"), entry.get("evalSet")) != (version, eval_set):
        # Recorded as the operator's yet evaluating something else: never counted.
        tampered.append(f"EvalRun {name} does not evaluate {version} on {eval_set}")
        return None
    outcome = EvalOutcome(
        name,
        eval_set,
        entry.get("verdict"),
        tuple(entry.get("regressions") or ()),
        entry.get("cause"),
        str(entry.get("why") or ""),
    )
    return outcome, uid


#: The verdict endpoint's answers (``GET /verdicts/<namespace>/<plural>/<name>``).
ENDPOINT_RUNNING = "Running"


def endpoint_verdict(view: Mapping[str, Any]) -> dict[str, Any]:
    """What the verdict endpoint answers for a Topology's or Agent's view: ``Pass`` once
    the current generation is promoted (Ready, without ``spec.promotion``), ``Fail`` when
    its candidate failed (or it is not Ready), ``Inconclusive`` when held inconclusive or
    rejected after an inconclusive evaluation, else ``Running`` (still evaluating, waiting
    for a person, or not reconciled yet). The Argo Rollouts template maps Pass to successful,
    Fail to failed, and the rest to inconclusive measurements."""
    status = view.get("status") or {}
    promotion = status.get("promotion") or {}
    current = view.get("generation") == view.get("observed")
    conds = {str(c.get("type")): c for c in status.get("conditions") or ()}
    gate = conds.get(PROMOTED) if "promotion" in status else conds.get(READY)
    state = str((gate or {}).get("status") or "Unknown")
    reason = str((gate or {}).get("reason") or "")
    if not current or gate is None or state == "Unknown":
        verdict = ENDPOINT_RUNNING
    elif state == "True":
        verdict = VERDICT_PASS
    elif reason in (REASON_INCONCLUSIVE, REASON_REJECTED):
        verdict = VERDICT_INCONCLUSIVE
    else:
        verdict = VERDICT_FAIL
    return {
        "verdict": verdict,
        "reason": reason,
        "message": str((gate or {}).get("message") or ""),
        "version": status.get("version"),
        "active": (promotion.get("active") or {}).get("version"),
        "candidate": (promotion.get("candidate") or {}).get("version"),
        "regressions": list((promotion.get("candidate") or {}).get("regressions") or ()),
    }
