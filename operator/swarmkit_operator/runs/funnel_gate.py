"""Funnel approvals of parked Runs: the Review's gate, and when its quorum holds.

A runner whose gated node passed (or exhausted) the automated layers parks with a
``funnel_approval`` item carrying the :class:`~swarmkit_api.funnel.GateReport`. The Review
the operator opens for it gets ``spec.request.gate`` (:func:`gate_request`):

* ``approve``: the approve layer **as the Run pinned it** (from the run's immutable bundle,
  never from what the runner reported), so the rules a person signs against are the ones
  the Topology was made Ready with;
* ``author``: who created the Run, from its annotation ``swarmkit.dev/created-by``, which the
  admission policies make unforgeable (:mod:`swarmkit_operator.admission`): set by the
  apiserver from the authenticated request at creation and immutable afterwards;
* ``report``: what the runner found (artifact, validation, score, critique, findings,
  attempts).

People sign by appending to ``spec.approvals`` (one entry per person and role; the admission
policy checks ``decidedBy`` is the caller, that the caller holds the role by user name or
group, and that the caller is not the author when ``excludeAuthor``). While the run waits,
:func:`swarmkit_api.review.decision_of` (the one decision accessor) turns the signatures
into a decision with :func:`swarmkit_api.quorum.tally`:
approve once every rule and ``minDistinctApprovers`` hold, reject on any rejection,
revise on a revision request (its comment goes to the drafting agent), nothing (keep
waiting) otherwise.

A revision starts a new approval round: the runner redrafts and parks again, and the new
Review's ``gate.rounds`` (:func:`rounds_before`) lists the earlier rounds of the gate with
their signatures, read from their Reviews (never from the runner), so the quorum can apply
``approve.onRevision`` to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from swarmkit_api.bundle import ReviewItem, RunBundle
from swarmkit_api.funnel import MAX_ROUNDS, Approval, ApprovalRound, ApproveLayer, FunnelSpec
from swarmkit_api.quorum import SERVICE_ACCOUNT_PREFIX, Tally
from swarmkit_api.review import FunnelGate

from .. import metrics

#: The Run annotation naming who created it (see the module docstring).
CREATED_BY_ANNOTATION = "swarmkit.dev/created-by"
FUNNEL_APPROVAL = "funnel_approval"


def pinned_funnel(bundle: RunBundle, funnel: str) -> FunnelSpec | None:
    """``funnel`` as the run's bundle pins it."""
    for topology in bundle.topologies.values():
        spec = topology.funnels.get(funnel)
        if spec is not None:
            return spec
    return None


def author_of(run: Mapping[str, Any]) -> str:
    annotations = (run.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(CREATED_BY_ANNOTATION) or "")


def revised_review(decisions: list[dict[str, Any]]) -> str | None:
    """The Review whose revision the run resumed with last (a new gate round follows it),
    or None when the run's last funnel decision was not a revision."""
    funnel = [d for d in decisions if d.get("kind") == FUNNEL_APPROVAL]
    if funnel and funnel[-1].get("verdict") == "revise":
        return str(funnel[-1].get("review") or "") or None
    return None


def rounds_before(previous: Mapping[str, Any] | None, item: ReviewItem) -> list[ApprovalRound]:
    """``gate.rounds`` of the Review for ``item``: the earlier rounds of ``previous`` (the
    Review the last revision was asked in) and that round itself, when it is the same gate
    (funnel and node); empty otherwise. At most ``MAX_ROUNDS``: the oldest are dropped
    (their signatures stop counting under reconfirmChanged, never the other way)."""
    found = gate_of(previous) if previous is not None else None
    if found is None or item.gate is None:
        return []
    gate, approvals = found
    if (gate.funnel, gate.report.node) != (item.gate.funnel, item.gate.node):
        return []
    name = str(((previous or {}).get("metadata") or {}).get("name") or "")
    last = ApprovalRound(round=gate.report.round, review=name, approvals=approvals)
    return [*gate.rounds, last][-MAX_ROUNDS:]


def author_refusal(funnel: str, approve: ApproveLayer, author: str, namespace: str) -> str | None:
    """Why a gate excluding its author cannot open for a run in ``namespace`` by
    ``author`` (None: it can)."""
    if not approve.exclude_author:
        return None
    if not author:
        # Never guess: a gate that must exclude its author cannot open without knowing who.
        return (
            f"funnel {funnel} excludes the run's author, but the Run has no "
            f"{CREATED_BY_ANNOTATION} annotation (the admission policies set it at creation)"
        )
    if author.startswith(f"{SERVICE_ACCOUNT_PREFIX}{namespace}:"):
        # Every editor of the namespace may `create token` for it: the author could be any
        # of them, so excluding "the author" would exclude no person (issue 46 item 6).
        # The operator's own account (scheduled Runs) lives in its own namespace.
        return (
            f"funnel {funnel} excludes the run's author, but the Run was created by "
            f"ServiceAccount {author}: anyone who may create its token can act as it, so "
            "its author is not one person; create the Run as a person to pass this gate"
        )
    return None


def gate_request(
    item: ReviewItem,
    bundle: RunBundle,
    author: str,
    rounds: list[ApprovalRound] | None = None,
    namespace: str = "",
) -> dict[str, Any] | str:
    """``spec.request.gate`` of the Review for ``item``, or why it cannot be opened."""
    if item.gate is None:
        return "the funnel approval carries no gate report"
    pinned = pinned_funnel(bundle, item.gate.funnel)
    if pinned is None:
        return f"funnel {item.gate.funnel} is not pinned in the run's bundle"
    approve = pinned.approve
    refused = author_refusal(item.gate.funnel, approve, author, namespace)
    if refused is not None:
        return refused
    gate = FunnelGate(
        funnel=item.gate.funnel,
        approve=approve,
        author=author,
        judge=pinned.judge,
        judge_content_hash=judge_hash(bundle, pinned),
        report=item.gate,
        rounds=rounds or [],
    )
    return gate.wire()


def gate_of(review: Mapping[str, Any]) -> tuple[FunnelGate, list[Approval]] | None:
    """:meth:`FunnelGate.of`, an unreadable gate being none (it never opens)."""
    try:
        return FunnelGate.of(review)
    except ValidationError:
        return None


def review_tally(review: Mapping[str, Any]) -> Tally | None:
    """The quorum as the Review's signatures leave it (None: not a funnel approval)."""
    found = gate_of(review)
    if found is None:
        return None
    gate, approvals = found
    return gate.tally(approvals)


_STATES = {
    "approve": "Approved",
    "reject": "Rejected",
    "timeout": "Expired",
    "revise": "RevisionRequested",
}


def gates_after(
    gates: list[dict[str, Any]], review: Mapping[str, Any], verdict: str | None
) -> list[dict[str, Any]] | None:
    """``status.gates`` with this Review's gate entered (``verdict`` None: it waits) or
    settled; None when the Review is not a funnel approval. Pure: the transition is
    counted by the status write that records it (:func:`new_transitions`,
    :func:`count_transition`), once it went through."""
    found = gate_of(review)
    if found is None:
        return None
    gate, _ = found
    name = str((review.get("metadata") or {}).get("name") or "")
    state = _STATES.get(verdict or "", "AwaitingApproval")
    entry: dict[str, Any] = {
        "funnel": gate.funnel,
        "node": gate.report.node,
        "review": name,
        "attempts": gate.report.attempts,
        "score": gate.report.score,
        "exhausted": gate.report.exhausted,
        "round": gate.report.round,
        **judged(gate),
        "state": state,
    }
    kept = [g for g in gates if g.get("review") != name]
    return [*kept, {k: v for k, v in entry.items() if v is not None}]


def judge_hash(bundle: RunBundle, funnel: FunnelSpec) -> str | None:
    """The content hash of ``funnel``'s judge skill as the run pinned it."""
    skill = bundle.skills.get(funnel.judge.skill) if funnel.judge is not None else None
    return skill.content_hash if skill is not None else None


def judged(gate: FunnelGate) -> dict[str, Any]:
    """The judge's verdict on the artifact the gate shows people, for ``status.gates``: its
    skill and threshold from the pinned judge layer (the operator wrote it into the
    Review), its score from the report (the runner resets the report for every draft, so a
    score is the judge's on this very artifact; none when validation or the judge itself
    failed on it). Empty when the funnel has no judge layer or the judge gave no score."""
    if gate.judge is None or gate.report.score is None:
        return {}
    out = {"judge": gate.judge.skill, "judgePassed": gate.report.score >= gate.judge.threshold}
    return {**out, "judgeContentHash": gate.judge_content_hash} if gate.judge_content_hash else out


def new_transitions(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> list[tuple[str, str]]:
    """(review, state) of every gate entry ``after`` shows and ``before`` did not: each is
    counted once, by the write that made it (not when a restarted leader re-reads a Run
    that shows it, nor by a retried write that failed the first time)."""
    shown = {(g.get("review"), g.get("state")) for g in before}
    return [
        (str(g.get("review")), str(g.get("state")))
        for g in after
        if (g.get("review"), g.get("state")) not in shown
    ]


def count_transition(review: Mapping[str, Any], state: str) -> None:
    """Count ``review``'s gate reaching ``state`` in ``swarmkit_funnel_gates_total`` (and,
    entered, its drafts in ``swarmkit_funnel_gate_attempts``, its report's layer results
    and retries)."""
    found = gate_of(review)
    if found is None:
        return
    namespace = str((review.get("metadata") or {}).get("namespace") or "")
    _count(namespace, found[0], state, entered=state == "AwaitingApproval")


def _count(namespace: str, gate: FunnelGate, state: str, entered: bool) -> None:
    metrics.FUNNEL_GATES.labels(namespace, gate.funnel, state).inc()
    if not entered:
        return
    report = gate.report
    metrics.FUNNEL_ATTEMPTS.labels(gate.funnel).observe(report.attempts)
    for result in report.layer_results:
        metrics.FUNNEL_LAYER_RESULTS.labels(
            namespace, gate.funnel, result.layer, result.outcome
        ).inc(result.count)
    if report.retries:
        metrics.FUNNEL_RETRIES.labels(namespace, gate.funnel).inc(report.retries)


__all__ = [
    "CREATED_BY_ANNOTATION",
    "FUNNEL_APPROVAL",
    "author_of",
    "author_refusal",
    "count_transition",
    "gate_of",
    "gate_request",
    "gates_after",
    "judge_hash",
    "judged",
    "new_transitions",
    "pinned_funnel",
    "review_tally",
    "revised_review",
    "rounds_before",
]
