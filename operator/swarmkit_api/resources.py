"""The kinds as Kubernetes resources: manifest models and CRD metadata.

``KINDS`` is the single list the CRD generator, the operator and the tests iterate over.
``validate_manifest`` validates a whole manifest dict and reports errors with the same
field paths the apiserver uses (``spec.files[0].path``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from .agent import AgentSpec, AgentStatus
from .base import ApiModel
from .common import KEBAB, ObjectMeta
from .conditions import READY, SERVING, SUCCEEDED
from .eval import EvalRunSpec, EvalRunStatus, EvalSetSpec, EvalSetStatus
from .funnel import FunnelSpec, FunnelStatus
from .mailbox import MailboxMessageSpec, MailboxMessageStatus
from .review import ReviewSpec, ReviewStatus
from .run import RunSpec, RunStatus
from .skill import SkillSpec, SkillStatus
from .spend import SpendQuotaSpec, SpendQuotaStatus
from .topology import TopologySpec, TopologyStatus
from .workspace import WorkspaceSpec, WorkspaceStatus

GROUP = "swarmkit.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CATEGORY = "swarmkit"


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0


@dataclass(frozen=True)
class KindInfo:
    """Everything the CRD generator needs to know about one kind."""

    kind: str
    plural: str
    short_names: tuple[str, ...]
    description: str
    spec: type[ApiModel]
    status: type[ApiModel]
    columns: tuple[PrinterColumn, ...]
    #: Whether metadata.name must be lowercase-kebab (names that become tool names).
    kebab_name: bool = False

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"


def _condition(type_: str, field: Literal["status", "reason"]) -> str:
    """The JSONPath of one field of the condition of type ``type_``."""
    return f'.status.conditions[?(@.type=="{type_}")].{field}'


def _ready_columns(version_path: str = ".status.version") -> tuple[PrinterColumn, ...]:
    return (
        PrinterColumn(READY, _condition(READY, "status"), description="Ready"),
        PrinterColumn(
            "Reason",
            _condition(READY, "reason"),
            description="Reason of the Ready condition",
        ),
        PrinterColumn("Version", version_path, description="Content-addressed version"),
        PrinterColumn("Age", ".metadata.creationTimestamp", type="date"),
    )


WORKSPACE = KindInfo(
    kind="Workspace",
    plural="workspaces",
    short_names=("skws",),
    description="Shared MCP servers, tools, credentials (Secret refs), model providers, "
    "command packs, runtime defaults and governance limits of a namespace's agents.",
    spec=WorkspaceSpec,
    status=WorkspaceStatus,
    columns=_ready_columns(),
)
SKILL = KindInfo(
    kind="Skill",
    plural="skills",
    short_names=("sk",),
    description="A SwarmKit skill: category, implementation, inputs/outputs, constraints, "
    "provenance, SKILL.md instructions and bundled files. Rendered into an immutable, "
    "content-addressed ConfigMap; bundled scripts are pinned by sha256.",
    spec=SkillSpec,
    status=SkillStatus,
    columns=(
        *_ready_columns(),
        PrinterColumn("Category", ".spec.category", priority=1),
    ),
    kebab_name=True,
)
AGENT = KindInfo(
    kind="Agent",
    plural="agents",
    short_names=("ska",),
    description="An agent: model, system prompt and default-deny grants of skills, tools, "
    "native tools, permissions and flow data. Its version folds in every granted skill.",
    spec=AgentSpec,
    status=AgentStatus,
    columns=_ready_columns(),
    kebab_name=True,
)
TOPOLOGY = KindInfo(
    kind="Topology",
    plural="topologies",
    short_names=("skt",),
    description="A tree of Agents (root, leaders, workers) run together, optionally on a "
    "cron schedule. Agent skills may call other topologies up to depth 3, never in a cycle.",
    spec=TopologySpec,
    status=TopologyStatus,
    columns=(
        *_ready_columns(),
        PrinterColumn(
            SERVING,
            _condition(SERVING, "status"),
            description="Serving over A2A (spec.serve)",
            priority=1,
        ),
        PrinterColumn("URL", ".status.url", description="Served Agent Card URL", priority=1),
    ),
    kebab_name=True,
)
RUN = KindInfo(
    kind="Run",
    plural="runs",
    short_names=("skr",),
    description="One execution of a Topology or Agent as a Job; its outcome is reported in "
    "the Succeeded condition with Tekton-style reasons.",
    spec=RunSpec,
    status=RunStatus,
    columns=(
        PrinterColumn(
            SUCCEEDED,
            _condition(SUCCEEDED, "status"),
            description="Succeeded",
        ),
        PrinterColumn(
            "Reason",
            _condition(SUCCEEDED, "reason"),
            description="Reason of the Succeeded condition",
        ),
        PrinterColumn("Version", ".status.pinned.topology", description="Pinned version"),
        PrinterColumn("StartTime", ".status.startTime", type="date", priority=1),
        PrinterColumn("Age", ".metadata.creationTimestamp", type="date"),
    ),
)

REVIEW = KindInfo(
    kind="Review",
    plural="reviews",
    short_names=("skrv",),
    description="A question a person must answer before a parked Run goes on (an "
    "escalation, a strict-tier approval, a relayed remote question, a human task) or before "
    "a swarm-authored Skill may be used. Created by the operator; answered by writing "
    "spec.decision (kubectl patch, or kubectl swarmkit review), which the admission policy "
    "ties to the authenticated user.",
    spec=ReviewSpec,
    status=ReviewStatus,
    columns=(
        PrinterColumn("Run", ".spec.request.runRef.name", description="The parked Run"),
        PrinterColumn("Kind", ".spec.request.kind", description="Kind of question"),
        PrinterColumn("State", ".status.state", description="Pending, Decided, Expired, Resumed"),
        PrinterColumn("Verdict", ".spec.decision.verdict", description="The decision"),
        PrinterColumn("DecidedBy", ".status.decidedBy", description="Authenticated decider"),
        PrinterColumn("Skill", ".spec.request.skillRef.name", priority=1),
        PrinterColumn("Deadline", ".spec.request.deadline", type="date", priority=1),
        PrinterColumn("Age", ".metadata.creationTimestamp", type="date"),
    ),
)

MAILBOX_MESSAGE = KindInfo(
    kind="MailboxMessage",
    plural="mailboxmessages",
    short_names=("skmb",),
    description="An item an agent put in a named mailbox (the mailbox_send tool), for people "
    "to read and acknowledge. Created by the operator; acknowledged by writing "
    "spec.acknowledgement (kubectl swarmkit ack), which the admission policy ties to the "
    "authenticated user.",
    spec=MailboxMessageSpec,
    status=MailboxMessageStatus,
    columns=(
        PrinterColumn("Mailbox", ".spec.mailbox", description="The mailbox"),
        PrinterColumn("Agent", ".spec.sender.agent", description="The agent that sent it"),
        PrinterColumn("Run", ".spec.sender.run", description="The Run it sent it from"),
        PrinterColumn(
            "Acknowledged", ".spec.acknowledgement.by", description="Who acknowledged it"
        ),
        PrinterColumn("Age", ".metadata.creationTimestamp", type="date"),
    ),
)


SPEND_QUOTA = KindInfo(
    kind="SpendQuota",
    plural="spendquotas",
    short_names=("skquota",),
    description="How much the Runs of a namespace (optionally only those of Topologies or "
    "Agents with given labels) may spend in cost and/or tokens over a window, like a "
    "ResourceQuota for model spend. Before a Run starts the operator reserves the Run's cap "
    "against every quota that covers it; a Run that does not fit waits (queue), asks a "
    "person (hold: a Review of kind spend) or fails. When the Run ends its actual spend "
    "replaces the reservation.",
    spec=SpendQuotaSpec,
    status=SpendQuotaStatus,
    columns=(
        PrinterColumn("Used", ".status.usedDisplay", description="Spent + reserved"),
        PrinterColumn("Limit", ".status.limit", description="Cost and/or tokens"),
        PrinterColumn("Remaining", ".status.remainingDisplay", description="Left in the window"),
        PrinterColumn("Window", ".spec.window", description="daily, monthly or rollingHours"),
        PrinterColumn("WindowStart", ".status.windowStart", type="date", priority=1),
        PrinterColumn("Age", ".metadata.creationTimestamp", type="date"),
    ),
)


FUNNEL = KindInfo(
    kind="Funnel",
    plural="funnels",
    short_names=("skf",),
    description="A quality gate bound to Topology agent nodes: every artifact the node's "
    "agent produces passes validate (JSON Schema), judge (a decision skill), review (a "
    "reviewer agent) and approve (people in roles, by quorum); only approve ends the gate.",
    spec=FunnelSpec,
    status=FunnelStatus,
    columns=(
        *_ready_columns()[:3],
        PrinterColumn("Judge", ".spec.judge.skill", description="Judge decision skill"),
        PrinterColumn("Threshold", ".spec.judge.threshold", type="number", priority=1),
        PrinterColumn("MaxRetries", ".spec.maxRetries", type="integer", priority=1),
        PrinterColumn("OnExhausted", ".spec.onExhausted", priority=1),
        PrinterColumn("Age", ".metadata.creationTimestamp", type="date"),
    ),
    kebab_name=True,
)

EVAL_SET = KindInfo(
    kind="EvalSet",
    plural="evalsets",
    short_names=("skes",),
    description="Evaluation cases: each an input and what a good answer is (exact, contains, "
    "regex, a JSON Schema with JSONPath assertions, a judge decision skill or a judge Agent), "
    "with weights and tags; or cases from recorded Runs (a label selector) replayed with "
    "their outputs as the reference.",
    spec=EvalSetSpec,
    status=EvalSetStatus,
    columns=(
        *_ready_columns(),
        PrinterColumn("Cases", ".status.caseCount", type="integer", description="Inline cases"),
    ),
    kebab_name=True,
)
EVAL_RUN = KindInfo(
    kind="EvalRun",
    plural="evalruns",
    short_names=("sker",),
    description="One EvalSet against a candidate (a Topology or Agent at a version) and a "
    "baseline in the same run: every case a Run per side and trial, graded; per-side pass "
    "rates with 95 % intervals, the paired difference, regressed, fixed and flaky cases, and "
    "a verdict Pass, Fail or Inconclusive. The spec is immutable.",
    spec=EvalRunSpec,
    status=EvalRunStatus,
    columns=(
        PrinterColumn("Verdict", ".status.verdict", description="Pass, Fail or Inconclusive"),
        PrinterColumn(
            SUCCEEDED, _condition(SUCCEEDED, "status"), description="Evaluation finished"
        ),
        PrinterColumn("Reason", _condition(SUCCEEDED, "reason"), description="Reason of Succeeded"),
        PrinterColumn(
            "Candidate", ".status.candidate.passRate", type="number", description="Pass rate"
        ),
        PrinterColumn(
            "Baseline", ".status.baseline.passRate", type="number", description="Pass rate"
        ),
        PrinterColumn("EvalSet", ".spec.evalSetRef.name", priority=1),
        PrinterColumn("Age", ".metadata.creationTimestamp", type="date"),
    ),
    # Its name is a label value of every Run it makes (swarmkit.dev/eval-run).
    kebab_name=True,
)

KINDS: tuple[KindInfo, ...] = (
    WORKSPACE,
    SKILL,
    AGENT,
    TOPOLOGY,
    RUN,
    REVIEW,
    FUNNEL,
    MAILBOX_MESSAGE,
    SPEND_QUOTA,
    EVAL_SET,
    EVAL_RUN,
)
KINDS_BY_NAME = {k.kind: k for k in KINDS}


class _Resource(ApiModel):
    api_version: Literal["swarmkit.dev/v1alpha1"] = Field(description="swarmkit.dev/v1alpha1")
    metadata: ObjectMeta = Field(description="Standard object metadata.")


class _KebabMeta(ObjectMeta):
    name: str | None = Field(default=None, pattern=KEBAB, max_length=63, description="Name.")


class Workspace(_Resource):
    kind: Literal["Workspace"] = Field(description="Workspace")
    spec: WorkspaceSpec = Field(description="Desired state.")
    status: WorkspaceStatus | None = Field(default=None, description="Observed state.")


class Skill(_Resource):
    kind: Literal["Skill"] = Field(description="Skill")
    metadata: _KebabMeta = Field(description="Standard object metadata.")
    spec: SkillSpec = Field(description="Desired state.")
    status: SkillStatus | None = Field(default=None, description="Observed state.")


class Agent(_Resource):
    kind: Literal["Agent"] = Field(description="Agent")
    metadata: _KebabMeta = Field(description="Standard object metadata.")
    spec: AgentSpec = Field(description="Desired state.")
    status: AgentStatus | None = Field(default=None, description="Observed state.")


class Topology(_Resource):
    kind: Literal["Topology"] = Field(description="Topology")
    metadata: _KebabMeta = Field(description="Standard object metadata.")
    spec: TopologySpec = Field(description="Desired state.")
    status: TopologyStatus | None = Field(default=None, description="Observed state.")


class Run(_Resource):
    kind: Literal["Run"] = Field(description="Run")
    spec: RunSpec = Field(description="Desired state.")
    status: RunStatus | None = Field(default=None, description="Observed state.")


class SpendQuota(_Resource):
    kind: Literal["SpendQuota"] = Field(description="SpendQuota")
    spec: SpendQuotaSpec = Field(description="Limits, window and scope.")
    status: SpendQuotaStatus | None = Field(default=None, description="Observed use.")


class Review(_Resource):
    kind: Literal["Review"] = Field(description="Review")
    spec: ReviewSpec = Field(description="The question and the decision.")
    status: ReviewStatus | None = Field(default=None, description="Observed state.")


class MailboxMessage(_Resource):
    kind: Literal["MailboxMessage"] = Field(description="MailboxMessage")
    spec: MailboxMessageSpec = Field(description="The item and its acknowledgement.")
    status: MailboxMessageStatus | None = Field(default=None, description="Observed state.")


class Funnel(_Resource):
    kind: Literal["Funnel"] = Field(description="Funnel")
    metadata: _KebabMeta = Field(description="Standard object metadata.")
    spec: FunnelSpec = Field(description="Desired state.")
    status: FunnelStatus | None = Field(default=None, description="Observed state.")


class EvalSet(_Resource):
    kind: Literal["EvalSet"] = Field(description="EvalSet")
    metadata: _KebabMeta = Field(description="Standard object metadata.")
    spec: EvalSetSpec = Field(description="Cases.")
    status: EvalSetStatus | None = Field(default=None, description="Observed state.")


class EvalRun(_Resource):
    kind: Literal["EvalRun"] = Field(description="EvalRun")
    metadata: _KebabMeta = Field(description="Standard object metadata.")
    spec: EvalRunSpec = Field(description="What is evaluated against what (immutable).")
    status: EvalRunStatus | None = Field(default=None, description="Results and verdict.")


RESOURCE_MODELS: dict[str, type[_Resource]] = {
    "Funnel": Funnel,
    "Review": Review,
    "MailboxMessage": MailboxMessage,
    "Workspace": Workspace,
    "Skill": Skill,
    "Agent": Agent,
    "Topology": Topology,
    "Run": Run,
    "SpendQuota": SpendQuota,
    "EvalSet": EvalSet,
    "EvalRun": EvalRun,
}


@dataclass(frozen=True)
class FieldError:
    """One validation problem: where (Kubernetes-style path), what, and pydantic's error
    type (``code``: ``invalid_schema`` for a JSON Schema the metaschema refuses)."""

    path: str
    message: str
    code: str = ""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ManifestError(ValueError):
    """A manifest failed validation; ``errors`` lists each problem with its field path."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


def format_loc(loc: tuple[int | str, ...], field_path: str = "") -> str:
    """Turn a pydantic error location into a Kubernetes field path."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    if field_path:
        out += field_path
    return out


def field_errors(exc: ValidationError, prefix: tuple[int | str, ...] = ()) -> list[FieldError]:
    """Field errors of a pydantic ValidationError, CEL-rule paths applied."""
    result: list[FieldError] = []
    for err in exc.errors():
        ctx = err.get("ctx") or {}
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function")))
        result.append(
            FieldError(
                format_loc(prefix + loc, str(ctx.get("field_path", ""))), err["msg"], err["type"]
            )
        )
    return result


def validate_manifest(doc: dict[str, Any]) -> BaseModel:
    """Validate a full manifest of any of the kinds; raise :class:`ManifestError`."""
    kind = doc.get("kind")
    model = RESOURCE_MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ManifestError(
            [FieldError("kind", f"expected one of {sorted(RESOURCE_MODELS)}, got {kind!r}")]
        )
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise ManifestError(field_errors(exc)) from None


def validate_spec(kind: str, spec: dict[str, Any]) -> ApiModel:
    """Validate just a spec (as the operator receives it); paths start at ``spec``."""
    info = KINDS_BY_NAME[kind]
    try:
        return info.spec.model_validate(spec)
    except ValidationError as exc:
        raise ManifestError(field_errors(exc, ("spec",))) from None
