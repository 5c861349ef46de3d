"""What an EvalRun creates (pure): its case snapshot, its case and judge Runs, cache keys.

An EvalRun evaluates the cases as they were when it started: the first reconcile writes
them (inline cases and those built from recorded Runs) into an immutable ConfigMap owned
by the EvalRun, and records its sha256 in status; every later reconcile reads that
snapshot back and refuses one with another digest (``TamperedObject``), so an EvalSet edited
meanwhile changes nothing of a running evaluation.

A case is an ordinary Run of the side's Topology or Agent (the one Run pipeline: budget
gate, bundle, Job, verdict), labelled with the EvalRun, the side, the case and the trial; a
model grader's judge is another Run, of the judge Agent, whose input is
:func:`~.eval_graders.judge_input`. The EvalRun owns them all (deleting it cascades).

A Run's name and labels prove nothing: an editor (built-in ``edit`` creates Runs) can take
a planned name first, with the labels and the EvalRun's uid in a controller
ownerReference. So the EvalRun records the uid of every Run it creates in its own
``status.createdUids`` (only the operator writes it), as a Run records its Jobs, and grades
only a Run the one check (:func:`~.trust.check_made`) proves its own and whose spec nobody
changed since (:func:`refused`); the same record decides which Runs start under its
up-front SpendQuota reservation and which Runs' spend it settles (:func:`proven`,
:func:`spent`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from swarmkit_api import API_VERSION
from swarmkit_api.conditions import REASON_TAMPERED_OBJECT, SUCCEEDED
from swarmkit_api.eval import MODEL_GRADERS, EvalCase, EvalRunSpec, Grader, RecordedRunSelector
from swarmkit_api.replay import RecordedCall
from swarmkit_api.spend import parse_money

from ..hashing import MAX_SUBDOMAIN, canonical_json, fitted, label_value, sha256_hex
from . import MANAGED_BY, trust
from .workload import Target

EVAL_RUN_LABEL = "swarmkit.dev/eval-run"
EVAL_SIDE_LABEL = "swarmkit.dev/eval-side"
EVAL_CASE_LABEL = "swarmkit.dev/eval-case"
EVAL_TRIAL_LABEL = "swarmkit.dev/eval-trial"
#: ``case`` (the side's answer) or ``judge`` (a model grader's verdict on it).
EVAL_ROLE_LABEL = "swarmkit.dev/eval-role"
CASES_FILE = "cases.json"
#: The tag of the cases built from recorded Runs: their Runs replay the recorded Run
#: (spec.readOnly and spec.replay: the runner answers every tool call that does not only
#: read from the recording and runs none, :mod:`swarmkit_api.replay`).
RECORDED_TAG = "recorded"

Side = Literal["candidate", "baseline"]
Role = Literal["case", "judge"]


@dataclass(frozen=True)
class SideTarget:
    """One side as resolved when the EvalRun started: what its Runs run, at which version."""

    kind: Literal["Topology", "Agent"]
    name: str
    version: str

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.name}"

    def ref(self) -> dict[str, Any]:
        key = "topologyRef" if self.kind == "Topology" else "agentRef"
        return {key: {"name": self.name}}


def recorded_cases(
    selector: RecordedRunSelector, runs: Sequence[Mapping[str, Any]]
) -> list[EvalCase]:
    """Cases from recorded Runs (summaries: metadata, spec, status): the succeeded ones
    carrying every label of the selector, newest first, their output the reference and
    their ``status.recording`` what the case's Runs replay (none recorded: every call
    above the read tier is refused)."""
    wanted = selector.match_labels
    grader = selector.grader or Grader(type="exact", expected="")
    found = [
        r
        for r in runs
        if all((r.get("labels") or {}).get(k) == v for k, v in wanted.items())
        and _succeeded(r)
        and (r.get("status") or {}).get("output") is not None
    ]
    found.sort(
        key=lambda r: (str(r.get("creationTimestamp") or ""), str(r.get("name"))), reverse=True
    )
    cases = []
    for r in found[: selector.max_cases]:
        status = r.get("status") or {}
        output = str(status.get("output"))
        cases.append(
            EvalCase(
                name=fitted(f"run-{r.get('name')}".replace(".", "-").lower(), 63),
                input=str((r.get("spec") or {}).get("input") or ""),
                grader=grader.model_copy(update={"expected": output}),
                tags=[RECORDED_TAG],
                replay=[RecordedCall.model_validate(c) for c in status.get("recording") or ()],
            )
        )
    return cases


def _succeeded(run: Mapping[str, Any]) -> bool:
    for cond in (run.get("status") or {}).get("conditions") or ():
        if cond.get("type") == SUCCEEDED:
            return bool(cond.get("status") == "True")
    return False


def snapshot_config_map(
    namespace: str, evalrun: str, uid: str, cases: Sequence[EvalCase]
) -> tuple[dict[str, Any], str]:
    """The immutable ConfigMap of the cases an EvalRun evaluates, and its data's sha256.

    Its name carries the EvalRun's uid: an EvalRun deleted and made again under its name
    (a promotion's, once the one found there was deleted) never finds its predecessor's
    snapshot there, which the garbage collector deletes with its owner."""
    data = {CASES_FILE: json.dumps([c.wire() for c in cases], sort_keys=True)}
    digest = sha256_hex(canonical_json(data))
    name = fitted(f"evalrun-{evalrun}-{uid[:8]}-{digest[:8]}", MAX_SUBDOMAIN)
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**MANAGED_BY, EVAL_RUN_LABEL: label_value(evalrun)},
            "ownerReferences": [_owner(evalrun, uid)],
        },
        "immutable": True,
        "data": data,
    }
    return manifest, digest


def snapshot_digest(data: Mapping[str, Any]) -> str:
    return sha256_hex(canonical_json(dict(data)))


def parse_snapshot(data: Mapping[str, Any]) -> list[EvalCase]:
    return [EvalCase.model_validate(c) for c in json.loads(str(data[CASES_FILE]))]


def _owner(evalrun: str, uid: str) -> dict[str, Any]:
    # blockOwnerDeletion false: it would need update on evalruns/finalizers, and nothing
    # has to wait for these to be deleted before the EvalRun goes.
    return {
        "apiVersion": API_VERSION,
        "kind": "EvalRun",
        "name": evalrun,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": False,
    }


def trials_of(case: EvalCase, spec: EvalRunSpec) -> int:
    """A deterministic grader gives the same grade every time: one trial."""
    return spec.trials if case.grader.type in MODEL_GRADERS else 1


def run_name(evalrun: str, role: Role, side: Side, case: str, trial: int) -> str:
    tag = f"{'j' if role == 'judge' else ''}{side[0]}{trial}"
    return fitted(f"{evalrun}-{case}-{tag}", MAX_SUBDOMAIN)


def case_run(
    namespace: str,
    evalrun: str,
    uid: str,
    spec: EvalRunSpec,
    role: Role,
    side: Side,
    case: str,
    trial: int,
    target: Mapping[str, Any],
    text: str,
    read_only: bool = False,
    replay: Sequence[RecordedCall] | None = None,
) -> dict[str, Any]:
    """A case Run (``target``: the side's ref) or a judge Run (the judge Agent's ref);
    ``replay``: the recording it replays (read-only too)."""
    run_spec: dict[str, Any] = {**target, "input": text, "correlationId": label_value(evalrun)}
    if read_only or replay is not None:
        run_spec["readOnly"] = True
    if replay is not None:
        run_spec["replay"] = [c.wire() for c in replay]
    if spec.timeout_seconds is not None:
        run_spec["timeoutSeconds"] = spec.timeout_seconds
    if spec.max_cost_per_run is not None:
        run_spec["maxCost"] = spec.max_cost_per_run
    return {
        "apiVersion": API_VERSION,
        "kind": "Run",
        "metadata": {
            "name": run_name(evalrun, role, side, case, trial),
            "namespace": namespace,
            "labels": {
                **MANAGED_BY,
                EVAL_RUN_LABEL: label_value(evalrun),
                EVAL_ROLE_LABEL: role,
                EVAL_SIDE_LABEL: side,
                EVAL_CASE_LABEL: case,
                EVAL_TRIAL_LABEL: str(trial),
            },
            "ownerReferences": [_owner(evalrun, uid)],
        },
        "spec": run_spec,
    }


def cache_key(case: EvalCase, target: SideTarget, trials: int) -> str:
    """The result cache's key: the case (input and grader), the target at its version, and
    the trials (a judged case graded 3 times is not one graded once)."""
    return sha256_hex(
        canonical_json(
            {
                "input": case.input,
                # The calibration gate does not change a grade: labelling a judge or
                # gating it keeps the results already cached (and the keys before it).
                "grader": {
                    k: v
                    for k, v in case.grader.wire().items()
                    if k not in ("minKappa", "minLabels")
                },
                "target": target.label,
                "version": target.version,
                "trials": trials,
                # Other recorded answers are another case (none: the keys before replay).
                **({"replay": [c.wire() for c in case.replay]} if case.replay is not None else {}),
            }
        )
    )[:20]


def eval_run_spender(evalrun_label: str) -> str:
    """The ``run`` of an EvalRun's up-front SpendQuota entry, from its Runs' label value."""
    return f"EvalRun/{evalrun_label}"


def planned_runs(
    namespace: str,
    evalrun: str,
    uid: str,
    spec: EvalRunSpec,
    cases: Sequence[EvalCase],
    targets: Mapping[Side, SideTarget],
) -> list[dict[str, Any]]:
    """Every Run the EvalRun may create at most: each case on each side ``trials_of`` times,
    and a judge Run for each of those whose grader is a model (its worst case is their caps'
    sum)."""
    out = []
    for case in cases:
        for side, target in targets.items():
            for trial in range(trials_of(case, spec)):
                ref = {**target.ref(), "version": target.version}
                args = (namespace, evalrun, uid, spec)
                out.append(case_run(*args, "case", side, case.name, trial, ref, case.input))
                if case.grader.type in MODEL_GRADERS and case.grader.agent is not None:
                    judge = {"agentRef": {"name": case.grader.agent}}
                    out.append(case_run(*args, "judge", side, case.name, trial, judge, ""))
    return out


def target(namespace: str, evalrun: str, uid: str) -> Target:
    """The EvalRun as the owner of its case and judge Runs (what the ledger and
    :func:`~.trust.check_made` key on)."""
    return Target("EvalRun", namespace, evalrun, uid, evalrun)


def orphaned(run: Mapping[str, Any], uid: str, live: Callable[[str], bool]) -> bool:
    """Whether ``run`` (a Run summary under one of the planned names of the EvalRun of uid
    ``uid``) is a deleted EvalRun's: its controller ownerReference names an EvalRun other
    than this one and ``live`` (whether an EvalRun of a uid exists) says it is gone.

    An EvalRun deleted and made again under its name (a promotion's, once the one found
    there was deleted) finds its predecessor's Runs under its planned names until the
    garbage collector deletes them: it waits for that and then creates its own, instead of
    taking them for someone's answers (``TamperedObject``, an errored case). They are never
    graded either way. A Run that also has a live owner is not deleted: the collector
    drops the dangling reference, and the Run is then checked like any other."""
    for ref in (run.get("metadata") or {}).get("ownerReferences") or ():
        owner = str(ref.get("uid") or "")
        if ref.get("kind") == "EvalRun" and owner and owner != uid and not live(owner):
            return True
    return False


def refused(run: Mapping[str, Any], owner: Target, made: trust.Made) -> trust.Refused | None:
    """Why ``run`` (a Run summary found under one of the EvalRun's planned names) must not
    be graded as the EvalRun's, or None when it is provably the one it created: its uid
    recorded (or remembered, or a predecessor's, :func:`~.trust.check_made`), and its spec
    as created (``metadata.generation`` 1: an edited spec, another input, counts as
    someone else's answer)."""
    try:
        trust.check_made("Run", run, owner, made)
    except trust.Refused as exc:
        return exc
    generation = int((run.get("metadata") or {}).get("generation") or 1)
    if generation != 1:
        return trust.Refused(
            REASON_TAMPERED_OBJECT,
            f"Run {run.get('name')} was created by the operator for EvalRun {owner.name} but "
            f"its spec was changed since (generation {generation}): it is not graded",
        )
    return None


def proven(recorded: Mapping[str, str], remembered: Collection[str], name: str, uid: str) -> bool:
    """Whether Run ``name`` (uid ``uid``) is one the EvalRun created: its uid recorded in
    the EvalRun's ``status.createdUids`` or remembered by this process (created, record on
    its way). What a Run's budget gate asks before it starts under the EvalRun's up-front
    reservation instead of its own."""
    return bool(uid) and (recorded.get(trust.made_key("Run", name)) == uid or uid in remembered)


def own_runs(
    runs: Sequence[Mapping[str, Any]], recorded: Mapping[str, str]
) -> list[Mapping[str, Any]]:
    """The Runs among ``runs`` (summaries) whose uid the EvalRun recorded."""
    return [r for r in runs if proven(recorded, (), str(r.get("name")), str(r.get("uid") or ""))]


def spent(runs: Sequence[Mapping[str, Any]]) -> tuple[int | None, int]:
    """(cost in micro-units, None when unknown; tokens) the EvalRun settles: what its own
    finished ``runs`` spent, except those that reserved their own cap (their
    ``status.spendReservations``: they settle it themselves; counting them here too would
    book their spend twice)."""
    cost: int | None = 0
    tokens = 0
    for run in runs:
        status = run.get("status") or {}
        if status.get("spendReservations"):
            continue
        usage = status.get("usage") or {}
        tokens += int(usage.get("inputTokens") or 0) + int(usage.get("outputTokens") or 0)
        if cost is not None and usage.get("cost") and not usage.get("costUnknown"):
            cost += parse_money(str(usage["cost"]))
        else:
            cost = None  # unknown (never counted as 0): the reserved cost stays booked
    return cost, tokens
