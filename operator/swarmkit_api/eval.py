"""Evaluation: the EvalSet (cases and what a good answer is) and the EvalRun (one EvalSet
against a candidate and a baseline version, with a verdict).

An ``EvalSet`` lists *cases*: an input and a *grader* that says whether an answer is good.
Deterministic graders (``exact``, ``contains``, ``regex``, ``jsonSchema`` with JSONPath
assertions) are pure functions the operator applies to a case Run's output; model graders
(``judgeSkill``: a decision skill's confidence against a threshold; ``judgeAgent``: a judge
Agent's structured verdict against a rubric) run as Runs of their own whose answer is read.
Cases may also come from recorded Runs (``fromRuns``: a label selector; their inputs, with
their recorded outputs as the reference): VectorStep's replay.

An ``EvalRun`` runs every case as a Run of the candidate and of the baseline (``trials``
times when a grader is a model), grades them, and writes per-case results, per-side pass
rates with 95 % Wilson intervals, the paired difference with a paired-bootstrap interval
(fixed seed: a replay gives the same numbers) and the exact McNemar test, the regressed,
fixed and flaky cases by name, and a verdict ``Pass | Fail | Inconclusive``. Its spec is
immutable: a different question is a new EvalRun.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from .base import ApiModel, CelRule
from .common import (
    KEBAB,
    MAX_LABELS,
    Conditions,
    JsonSchema,
    LabelValue,
    LocalObjectReference,
    labels_rule,
)
from .replay import MAX_RECORDED_CALLS, RecordedCall
from .spend import MONEY_PATTERN

#: Most cases an EvalSet lists (inline and from recorded Runs together): an EvalRun's
#: status keeps one entry per case, and must fit an object (1.5 MiB in etcd).
MAX_CASES = 200
#: Most trials of a case per side.
MAX_TRIALS = 10
#: Characters of a grader's reasoning kept per case result.
MAX_REASONING = 400
#: Most human labels on one case (each is one judge Run of every EvalRun that calibrates).
MAX_HUMAN_LABELS = 50

GraderType = Literal["exact", "contains", "regex", "jsonSchema", "judgeSkill", "judgeAgent"]
#: Graders whose answer comes from a model (run ``trials`` times; cases are flaky when the
#: trials disagree).
MODEL_GRADERS: frozenset[str] = frozenset({"judgeSkill", "judgeAgent"})

Verdict = Literal["Pass", "Fail", "Inconclusive"]
CaseOutcome = Literal["Pending", "Passed", "Failed", "Errored"]
#: How a case moved between baseline and candidate.
CaseChange = Literal["Same", "Regressed", "Fixed", "Flaky", "Errored", "Pending"]


class JsonPathAssertion(ApiModel):
    """One assertion on the answer parsed as JSON, at a JSONPath (``$.a.b[0]``)."""

    cel_rules = (
        CelRule(
            rule="[has(self.equals), has(self.matches), has(self.exists)].filter(x, x).size() == 1",
            message="set exactly one of equals, matches and exists",
            field_path=".equals",
            check=lambda m: sum(x is not None for x in (m.equals, m.matches, m.exists)) == 1,
        ),
    )

    path: str = Field(
        pattern=r"^\$(\.[A-Za-z_][A-Za-z0-9_-]*|\[[0-9]+\]|\['[^']+'\])*$",
        max_length=512,
        description="JSONPath into the answer: $ then .name, [index] or ['key'] steps.",
    )
    equals: str | None = Field(
        default=None,
        max_length=65536,
        description="The value there must equal this JSON value, written as JSON text "
        "('\"high\"', '3', '{\"a\": 1}'); text that is not JSON makes the grader error.",
    )
    matches: str | None = Field(
        default=None,
        max_length=1024,
        description="The value there, a string, must match this regular expression (search).",
    )
    exists: bool | None = Field(
        default=None, description="The path must (true) or must not (false) exist."
    )


_GRADER_FIELDS: dict[str, tuple[str, ...]] = {
    "exact": ("expected",),
    "contains": ("expected",),
    "regex": ("pattern",),
    "jsonSchema": (),
    "judgeSkill": ("skill", "agent"),
    "judgeAgent": ("agent", "rubric"),
}


def _grader_complete(m: Any) -> bool:
    if m.type == "jsonSchema":
        return m.schema_ is not None or bool(m.assertions)
    return all(getattr(m, f) is not None for f in _GRADER_FIELDS[m.type])


class Grader(ApiModel):
    """What a good answer is, and how it is checked."""

    cel_rules = (
        CelRule(
            rule="(self.type != 'exact' && self.type != 'contains') || has(self.expected)",
            message="exact and contains graders need expected",
            field_path=".expected",
            check=lambda m: m.type not in ("exact", "contains") or m.expected is not None,
        ),
        CelRule(
            rule="self.type != 'regex' || has(self.pattern)",
            message="a regex grader needs pattern",
            field_path=".pattern",
            check=lambda m: m.type != "regex" or m.pattern is not None,
        ),
        CelRule(
            rule="self.type != 'jsonSchema' || has(self.schema) || "
            "(has(self.assertions) && size(self.assertions) > 0)",
            message="a jsonSchema grader needs schema or assertions",
            field_path=".schema",
            check=lambda m: m.type != "jsonSchema" or _grader_complete(m),
        ),
        CelRule(
            rule="self.type != 'judgeSkill' || (has(self.skill) && has(self.agent))",
            message="a judgeSkill grader needs skill (a decision Skill) and agent (the judge "
            "Agent granted it, whose answer is the skill's structured output)",
            field_path=".skill",
            check=lambda m: m.type != "judgeSkill" or _grader_complete(m),
        ),
        CelRule(
            rule="self.type != 'judgeAgent' || (has(self.agent) && has(self.rubric))",
            message="a judgeAgent grader needs agent and rubric",
            field_path=".agent",
            check=lambda m: m.type != "judgeAgent" or _grader_complete(m),
        ),
        CelRule(
            rule="!has(self.minKappa) || self.type == 'judgeSkill' || self.type == 'judgeAgent'",
            message="minKappa gates a judge: only a judgeSkill or judgeAgent grader has it",
            field_path=".minKappa",
            check=lambda m: m.min_kappa is None or m.type in MODEL_GRADERS,
        ),
    )

    type: GraderType = Field(
        description="exact | contains | regex | jsonSchema | judgeSkill | judgeAgent."
    )
    expected: str | None = Field(
        default=None,
        max_length=65536,
        description="exact: the whole answer (trimmed) equals this; contains: the answer "
        "contains it. Also the reference answer a judge sees.",
    )
    pattern: str | None = Field(
        default=None, max_length=4096, description="regex: a Python regular expression (search)."
    )
    ignore_case: bool = Field(
        default=False, description="exact, contains, regex: compare without case."
    )
    schema_: JsonSchema | None = Field(
        default=None,
        alias="schema",
        description="jsonSchema: the answer, parsed as JSON (a ```json fence accepted), must "
        "match this JSON Schema (2020-12).",
    )
    assertions: list[JsonPathAssertion] = Field(
        default_factory=list,
        max_length=50,
        description="jsonSchema: assertions at JSONPaths of the parsed answer.",
    )
    skill: str | None = Field(
        default=None,
        pattern=KEBAB,
        max_length=63,
        description="judgeSkill: the decision Skill (outputs carry confidence and reasoning).",
    )
    agent: str | None = Field(
        default=None,
        pattern=KEBAB,
        max_length=63,
        description="judgeSkill: the judge Agent granted the skill; judgeAgent: the judge "
        "Agent. Its Run's answer is JSON {verdict: pass|fail, score, reasoning} (judgeAgent) "
        "or the skill's {verdict, confidence, reasoning} (judgeSkill).",
    )
    threshold: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description="judgeSkill: confidence at or above this passes; judgeAgent: score at "
        "or above this passes when the judge gives a score.",
    )
    rubric: str | None = Field(
        default=None, max_length=16384, description="judgeAgent: what the judge checks."
    )
    min_kappa: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="judgeSkill, judgeAgent: the judge is trusted to decide only when its "
        "Cohen's kappa against the human labels of the EvalSet's cases it judges is at least "
        "this; otherwise (or with fewer than minLabels labels) an EvalRun's verdict is "
        "Inconclusive. Unset: no calibration gate.",
    )
    min_labels: int = Field(
        default=10,
        ge=2,
        le=1000,
        description="judgeSkill, judgeAgent: fewest labelled answers to estimate the judge's "
        "kappa from (fewer: Inconclusive, reason TooFewLabels, when minKappa is set).",
    )


class HumanLabel(ApiModel):
    """A person's verdict on one answer to a judged case: what the judge should say."""

    answer: str = Field(max_length=65536, description="An answer to the case's input.")
    verdict: Literal["pass", "fail"] = Field(description="The person's verdict: pass or fail.")
    by: str | None = Field(
        default=None, max_length=253, description="Who labelled it (shown, not checked)."
    )


class EvalCase(ApiModel):
    """One case: an input and what a good answer to it is."""

    cel_rules = (
        CelRule(
            rule="!has(self.humanLabels) || size(self.humanLabels) == 0 || "
            "self.grader.type == 'judgeSkill' || self.grader.type == 'judgeAgent'",
            message="humanLabels calibrate a judge: only a judgeSkill or judgeAgent case has them",
            field_path=".humanLabels",
            check=lambda m: not m.human_labels or m.grader.type in MODEL_GRADERS,
        ),
        # The schema's ``minimum: 0.01`` alone lets a whole number through: the apiserver
        # compares an integer value against the minimum truncated to an integer (0), so
        # ``weight: 0`` was admitted (test_crds_apiserver's corpus case). CEL compares doubles.
        CelRule(
            rule="!has(self.weight) || self.weight >= 0.01",
            message="weight must be at least 0.01",
            field_path=".weight",
            check=lambda m: m.weight >= 0.01,
        ),
    )

    name: str = Field(pattern=KEBAB, max_length=63, description="Unique name of the case.")
    input: str = Field(max_length=65536, description="The input given to the target's Run.")
    grader: Grader = Field(description="What a good answer is.")
    weight: float = Field(
        default=1.0, ge=0.01, le=100, description="Weight in the weighted score and difference."
    )
    tags: list[str] = Field(
        default_factory=list, max_length=20, description="Free-form tags (shown, filterable)."
    )
    critical: bool = Field(
        default=False,
        description="A regression of this case alone fails the EvalRun (whatever the rates).",
    )
    human_labels: list[HumanLabel] = Field(
        default_factory=list,
        max_length=MAX_HUMAN_LABELS,
        description="judgeSkill, judgeAgent: answers a person labelled pass or fail. Every "
        "EvalRun runs the judge on each and reports its Cohen's kappa against them "
        "(status.judges); the grader's minKappa gates on it.",
    )
    replay: list[RecordedCall] | None = Field(
        default=None,
        max_length=MAX_RECORDED_CALLS,
        description="The case's Runs replay this recording (a case built from a recorded Run: "
        "its status.recording): every tool call that does not only read gets the recorded "
        "answer and is never run (Run spec.replay).",
    )


class RecordedRunSelector(ApiModel):
    """Cases built from recorded Runs: their inputs, their outputs as the reference."""

    cel_rules = (labels_rule("matchLabels", "matchLabels"),)

    match_labels: dict[str, LabelValue] = Field(
        min_length=1,
        max_length=MAX_LABELS,
        description="Labels of the Runs (metadata.labels) to replay; only Runs that "
        "succeeded count.",
    )
    grader: Grader | None = Field(
        default=None,
        description="How an answer is compared with the recorded output (default: exact). "
        "Its expected is the recorded output.",
    )
    max_cases: int = Field(
        default=50, ge=1, le=MAX_CASES, description="Most recorded Runs taken (newest first)."
    )


class EvalSetSpec(ApiModel):
    """Cases, inline and/or from recorded Runs."""

    cel_rules = (
        CelRule(
            rule="(has(self.cases) && size(self.cases) > 0) || has(self.fromRuns)",
            message="an EvalSet needs cases or fromRuns",
            field_path=".cases",
            check=lambda m: bool(m.cases) or m.from_runs is not None,
        ),
        CelRule(
            rule="!has(self.cases) || "
            "self.cases.all(c, self.cases.exists_one(d, d.name == c.name))",
            message="case names must be unique",
            field_path=".cases",
            check=lambda m: len({c.name for c in m.cases}) == len(m.cases),
        ),
    )

    cases: list[EvalCase] = Field(
        default_factory=list, max_length=MAX_CASES, description="The cases."
    )
    from_runs: RecordedRunSelector | None = Field(
        default=None, description="Also cases from recorded Runs (replay mode)."
    )


class Interval(ApiModel):
    """A 95 % interval."""

    low: float = Field(description="Lower bound.")
    high: float = Field(description="Upper bound.")


#: Most funnel decisions a judge skill's agreement counts (the newest).
MAX_FUNNEL_DECISIONS = 200


class FunnelAgreement(ApiModel):
    """A judge skill's agreement with people's decisions on the artifacts its verdict
    gated in Funnels (the Runs' ``status.gates``, written by the operator)."""

    skill: str = Field(description="The decision Skill a Funnel's judge layer runs.")
    content_hash: str | None = Field(
        default=None,
        description="The Skill's content hash the decisions were judged with (its current "
        "one): decisions on what an earlier version judged are left out.",
    )
    other_versions: int = Field(
        default=0, ge=0, description="Decisions left out: judged by another version of it."
    )
    funnels: list[str] = Field(
        default_factory=list, max_length=64, description="The Funnels the decisions came from."
    )
    decisions: int = Field(
        default=0, ge=0, description="Decided artifacts the judge gave a verdict on (paired)."
    )
    agreed: int = Field(
        default=0, ge=0, description="Of decisions, those where judge and people agree."
    )
    judge_failed: int = Field(
        default=0,
        ge=0,
        description="Of decisions, artifacts the judge failed (shown to people only when the "
        "retries ran out): without any, kappa is 0 or unset.",
    )
    people_failed: int = Field(
        default=0, ge=0, description="Of decisions, artifacts people rejected or sent back."
    )
    kappa: float | None = Field(
        default=None, description="Cohen's kappa (unset: no decisions, or no variation)."
    )
    standard_error: float | None = Field(
        default=None, description="Its large-sample standard error (Fleiss, Cohen, Everitt 1969)."
    )
    interval: Interval | None = Field(default=None, description="kappa ± 1.96 standard errors.")


class JudgeCalibration(ApiModel):
    """One judge's agreement with the human labels of the cases it judges (and, for a
    judgeSkill judge, with people's Funnel decisions on what its skill judged)."""

    judge: str = Field(description="Agent/<name>, with +Skill/<name> for a judgeSkill judge.")
    labels: int = Field(default=0, ge=0, description="Labelled answers the judge graded.")
    errored: int = Field(
        default=0, ge=0, description="Labelled answers the judge gave no verdict on (left out)."
    )
    agreed: int = Field(
        default=0, ge=0, description="Of labels, those where judge and person agree."
    )
    kappa: float | None = Field(
        default=None, description="Cohen's kappa (unset: too few labels, or no variation)."
    )
    standard_error: float | None = Field(
        default=None, description="Its large-sample standard error (Fleiss, Cohen, Everitt 1969)."
    )
    interval: Interval | None = Field(default=None, description="kappa ± 1.96 standard errors.")
    min_kappa: float | None = Field(default=None, description="The gate (highest of its graders).")
    min_labels: int | None = Field(default=None, description="Fewest labels the gate accepts.")
    funnel_decisions: FunnelAgreement | None = Field(
        default=None,
        description="A judgeSkill judge: its skill's agreement with people's Funnel decisions "
        "(a separate table; it calibrates the judge when it clears the gate by itself).",
    )
    calibrated: bool | None = Field(
        default=None,
        description="kappa ≥ minKappa over at least minLabels labels, or the same of its "
        "Funnel decisions (unset: no gate).",
    )


class EvalSetStatus(ApiModel):
    """Observed state of an EvalSet."""

    observed_generation: int = Field(default=0, description="Last generation reconciled.")
    version: str | None = Field(
        default=None, description="sha256[:12] of the canonical spec (results cache key)."
    )
    case_count: int = Field(default=0, ge=0, description="Inline cases.")
    model_graded: int = Field(default=0, ge=0, description="Cases graded by a model (judges).")
    judges: list[JudgeCalibration] = Field(
        default_factory=list,
        max_length=MAX_CASES,
        description="Each judge's Cohen's kappa against the human labels, as the newest "
        "finished EvalRun of this version of the EvalSet measured it.",
    )
    calibration_eval_run: str | None = Field(
        default=None, description="The EvalRun whose calibration judges shows."
    )
    funnel_agreement: list[FunnelAgreement] = Field(
        default_factory=list,
        max_length=MAX_CASES,
        description="Each judgeSkill skill that also judges a Funnel: its agreement with "
        "people's decisions there, now (the newest MAX_FUNNEL_DECISIONS).",
    )
    conditions: Conditions = Field(default_factory=list, description="Accepted, Ready.")


class EvalTarget(ApiModel):
    """What one side of an EvalRun runs: a Topology or an Agent, at a version."""

    cel_rules = (
        CelRule(
            rule="has(self.topologyRef) != has(self.agentRef)",
            message="exactly one of topologyRef or agentRef must be set",
            field_path=".topologyRef",
            check=lambda m: (m.topology_ref is None) != (m.agent_ref is None),
        ),
    )

    topology_ref: LocalObjectReference | None = Field(default=None, description="A Topology.")
    agent_ref: LocalObjectReference | None = Field(default=None, description="Or an Agent.")
    version: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{8,64}$",
        description="The content hash the side must run at (status.version of the "
        "target); unset: the version its Runs pin when the EvalRun starts. A case Run that "
        "pinned another version is errored, never graded.",
    )


class BaselineTarget(ApiModel):
    """The baseline side: by default the candidate's own target at its promoted version."""

    cel_rules = (
        CelRule(
            rule="!(has(self.topologyRef) && has(self.agentRef))",
            message="set at most one of topologyRef or agentRef",
            field_path=".topologyRef",
            check=lambda m: m.topology_ref is None or m.agent_ref is None,
        ),
    )

    topology_ref: LocalObjectReference | None = Field(
        default=None, description="A Topology (default: the candidate's target)."
    )
    agent_ref: LocalObjectReference | None = Field(default=None, description="Or an Agent.")
    version: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{8,64}$",
        description="The content hash (default: the target's promoted version, else the "
        "version its Runs pin when the EvalRun starts).",
    )


class EvalCriteria(ApiModel):
    """When the candidate passes. An interval that straddles a bound is Inconclusive."""

    min_cases: int = Field(
        default=5,
        ge=1,
        le=MAX_CASES,
        description="Fewer graded cases (errored ones do not count) is Inconclusive.",
    )
    non_inferiority_margin: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="Pass needs the paired difference's 95 % interval (candidate - "
        "baseline) entirely above -margin; entirely below it is Fail.",
    )
    min_pass_rate: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Pass needs the candidate's 95 % interval at or above this; entirely "
        "below it is Fail.",
    )
    max_new_regressions: int | None = Field(
        default=None, ge=0, description="More regressed cases than this is Fail."
    )


class EvalRunSpec(ApiModel):
    """One EvalSet against a candidate and a baseline. Immutable."""

    cel_rules = (
        CelRule(
            rule="self == oldSelf",
            message="spec is immutable: create a new EvalRun to evaluate something else",
            check=lambda _m: True,  # a transition rule: only the apiserver sees the old object
        ),
    )

    eval_set_ref: LocalObjectReference = Field(description="The EvalSet.")
    candidate: EvalTarget = Field(description="What is evaluated.")
    baseline: BaselineTarget | None = Field(
        default=None,
        description="What it is compared with (default: the candidate's target at its "
        "promoted version). Set compare: false for no baseline.",
    )
    compare: bool = Field(
        default=True,
        description="Run a baseline (false: the candidate alone, no difference, and the "
        "verdict only from minPassRate).",
    )
    trials: int = Field(
        default=3,
        ge=1,
        le=MAX_TRIALS,
        description="Runs per case and side when its grader is a model (deterministic "
        "graders: one trial).",
    )
    parallelism: int = Field(
        default=4, ge=1, le=50, description="Most case Runs (and judge Runs) at once."
    )
    criteria: EvalCriteria = Field(
        default_factory=EvalCriteria, description="When the candidate passes."
    )
    max_cost_per_run: str | None = Field(
        default=None,
        pattern=MONEY_PATTERN,
        description="maxCost of every case and judge Run (reserved on the namespace's "
        "SpendQuotas before each starts; a Run refused for budget is an errored case).",
    )
    timeout_seconds: int | None = Field(
        default=None, ge=1, le=86400, description="Deadline of every case and judge Run."
    )
    reuse_results: bool = Field(
        default=True,
        description="Reuse a result already graded by another EvalRun of the namespace for "
        "the same case, version, grader and trial (a baseline is scored once).",
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="Seed of the paired bootstrap.")


class SideResult(ApiModel):
    """One case on one side: the trials' outcome and what grading said."""

    outcome: CaseOutcome = Field(default="Pending", description="Pending, Passed, Failed, Errored.")
    passes: int = Field(default=0, ge=0, description="Trials that passed.")
    trials: int = Field(default=0, ge=0, description="Trials graded (errored ones included).")
    score: float | None = Field(default=None, description="Mean score over trials (0..1).")
    reasoning: str | None = Field(
        default=None,
        max_length=MAX_REASONING + 16,
        description=f"The grader's reasoning or the error (first {MAX_REASONING} characters).",
    )
    runs: list[str] = Field(default_factory=list, description="The case Runs (one per trial).")
    judge_runs: list[str] = Field(default_factory=list, description="The judges' Runs.")
    version: str | None = Field(default=None, description="The version the Runs pinned.")
    cost: str | None = Field(default=None, description="What the Runs cost (judges included).")
    latency_seconds: float | None = Field(
        default=None, description="Mean wall time of the case Runs."
    )
    cached: bool = Field(
        default=False, description="Reused from another EvalRun's result (same key)."
    )
    key: str | None = Field(
        default=None,
        description="Results cache key: sha256 of the case (input, grader), the target, its "
        "version and the trials.",
    )


class CaseResult(ApiModel):
    """One case: both sides and how it moved."""

    name: str = Field(description="The case.")
    weight: float = Field(default=1.0, description="Its weight.")
    grader: str = Field(description="Its grader type.")
    candidate: SideResult = Field(default_factory=SideResult, description="Candidate.")
    baseline: SideResult | None = Field(default=None, description="Baseline.")
    change: CaseChange = Field(
        default="Pending", description="Same, Regressed, Fixed, Flaky, Errored or Pending."
    )


class SideSummary(ApiModel):
    """One side over every graded case."""

    target: str = Field(description="Topology/<name> or Agent/<name>.")
    version: str | None = Field(default=None, description="The version its Runs pinned.")
    cases: int = Field(default=0, ge=0, description="Cases graded (errored excluded).")
    passed: int = Field(default=0, ge=0, description="Cases passed.")
    errored: int = Field(default=0, ge=0, description="Cases errored.")
    pass_rate: float | None = Field(default=None, description="passed / cases.")
    interval: Interval | None = Field(default=None, description="Wilson 95 % interval.")
    score: float | None = Field(default=None, description="Weighted mean score (0..1).")
    cost: str | None = Field(default=None, description="Total cost of its Runs.")
    latency_p50_seconds: float | None = Field(default=None, description="Median Run latency.")
    latency_p95_seconds: float | None = Field(default=None, description="95th percentile.")


class Comparison(ApiModel):
    """Candidate against baseline, paired by case."""

    pairs: int = Field(default=0, ge=0, description="Cases graded on both sides.")
    difference: float | None = Field(
        default=None, description="Weighted mean of candidate - baseline score per case."
    )
    interval: Interval | None = Field(
        default=None, description="Paired bootstrap 95 % interval (fixed seed)."
    )
    regressed: int = Field(default=0, ge=0, description="Baseline passed, candidate not.")
    fixed: int = Field(default=0, ge=0, description="Candidate passed, baseline not.")
    p_value: float | None = Field(
        default=None, description="Exact McNemar (two-sided binomial sign test) p-value."
    )


class EvalRunStatus(ApiModel):
    """Observed state of an EvalRun."""

    observed_generation: int = Field(default=0, description="Last generation reconciled.")
    eval_set_version: str | None = Field(default=None, description="The EvalSet's version.")
    start_time: datetime | None = Field(default=None, description="When it started.")
    completion_time: datetime | None = Field(default=None, description="When the verdict came.")
    spend_reservations: list[str] | None = Field(
        default=None,
        description="The SpendQuotas holding its worst case, reserved before its first Run "
        "(its Runs reserve nothing of their own) and settled to what they spent at the end.",
    )
    cases_config_map: str | None = Field(
        default=None, description="The immutable snapshot of the cases it evaluates."
    )
    cases_sha256: str | None = Field(
        default=None,
        description="sha256 of that snapshot, recorded when the operator wrote it (another "
        "digest is never used: TamperedObject).",
    )
    created_uids: dict[str, str] = Field(
        default_factory=dict,
        description="Run/<name> → uid of each case and judge Run the operator created for "
        "it, recorded right after the create: a Run under one of its names that is not the "
        "one recorded is never graded (TamperedObject) and never starts under its "
        "reservation.",
    )
    verdict: Verdict | None = Field(default=None, description="Pass, Fail or Inconclusive.")
    verdict_reason: str | None = Field(default=None, description="Why that verdict.")
    candidate: SideSummary | None = Field(default=None, description="The candidate.")
    baseline: SideSummary | None = Field(default=None, description="The baseline.")
    comparison: Comparison | None = Field(default=None, description="The paired comparison.")
    regressed: list[str] = Field(default_factory=list, description="Regressed cases.")
    fixed: list[str] = Field(default_factory=list, description="Fixed cases.")
    flaky: list[str] = Field(default_factory=list, description="Cases whose trials disagree.")
    errored: list[str] = Field(default_factory=list, description="Cases errored on a side.")
    total_cost: str | None = Field(default=None, description="Cost of every Run.")
    currency: str | None = Field(default=None, description="Currency of the costs.")
    cases: list[CaseResult] = Field(
        default_factory=list, max_length=MAX_CASES, description="Per-case results."
    )
    judges: list[JudgeCalibration] = Field(
        default_factory=list,
        max_length=MAX_CASES,
        description="Each judge's Cohen's kappa against the human labels (cases with "
        "humanLabels or a minKappa).",
    )
    conditions: Conditions = Field(default_factory=list, description="Succeeded.")


__all__ = [
    "MAX_CASES",
    "MAX_FUNNEL_DECISIONS",
    "MAX_HUMAN_LABELS",
    "MAX_REASONING",
    "MAX_TRIALS",
    "MODEL_GRADERS",
    "BaselineTarget",
    "CaseResult",
    "Comparison",
    "EvalCase",
    "EvalCriteria",
    "EvalRunSpec",
    "EvalRunStatus",
    "EvalSetSpec",
    "EvalSetStatus",
    "EvalTarget",
    "FunnelAgreement",
    "Grader",
    "HumanLabel",
    "Interval",
    "JsonPathAssertion",
    "JudgeCalibration",
    "RecordedRunSelector",
    "SideResult",
    "SideSummary",
]
