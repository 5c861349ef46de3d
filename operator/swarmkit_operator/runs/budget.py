"""The budget gate of a Run's start: reserve its cap on the SpendQuotas that cover it.

Called by :func:`.start.start` once the target is resolved and before anything is created.
The quotas' names are written to ``status.spendReservations`` *before* reserving, so a crash
at any point leaves a Run whose reservations are found again (reserving is idempotent per
Run uid, see :mod:`swarmkit_operator.builders.spend`).

A case or judge Run of an EvalRun reserves nothing when every covering quota holds that
EvalRun's live up-front reservation (entry ``EvalRun/<name>``, whose uid is the EvalRun's)
*and* that EvalRun proves it created the Run: its uid is in the EvalRun's
``status.createdUids`` or in the ledger of this process (created, record on its way). The
EvalRun reserved its worst case and settles what those Runs spent
(:mod:`swarmkit_operator.handlers.evaluation`). The label alone proves nothing (an editor
may create a Run bearing it): any other labelled Run reserves its own cap like every Run,
and the EvalRun's settle leaves it out.

A quota with ``onExhausted: hold`` that cannot cover the Run opens a Review of kind
``spend`` (owned by the Run, decided like every Review: RBAC says who may patch it, the
admission policy ties ``decidedBy`` to the authenticated user). Approve: the Run is reserved
past the limit and starts; reject: it fails ``BudgetExhausted``. Until then it waits
(``BudgetHold``); if the quota frees up first it starts without the decision. The agent of
the Run that started it may clear the hold too (``approve_spend``: :mod:`.spend_approval`).
"""

from __future__ import annotations

from swarmkit_api.conditions import REASON_BUDGET_EXHAUSTED, REASON_BUDGET_HOLD
from swarmkit_api.review import decision_of
from swarmkit_api.run import RunSpec
from swarmkit_api.workspace import WorkspaceSpec

from .. import k8s
from ..builders import eval_runs as er
from ..builders import run_status as rs
from ..builders import spend as quota
from ..builders.eval_runs import EVAL_RUN_LABEL, eval_run_spender
from ..reviews import Transition
from . import spend, spend_approval, status
from .model import RunView, run_ref
from .state import RunState


async def gate(
    st: RunState, run: RunView, spec: RunSpec, workspace: WorkspaceSpec
) -> tuple[bool, float | None]:
    """(may start now, recheck after seconds): reserved, or waiting / failed on a quota."""
    known = st.idx.spend_quotas
    if known is not None and not known.get(run.namespace):
        # No SpendQuota in the namespace (the watch says so): nothing to reserve, no LIST.
        # A quota covers the Runs that start once the operator has seen it.
        return True, None
    names = await spend.covering(run.namespace, spec)
    if not names:
        return True, None
    evalrun = run.labels.get(EVAL_RUN_LABEL)
    if evalrun and await _under_eval_run(st, run, names, evalrun):
        # A case or judge Run its EvalRun created: its worst case is reserved up front, and
        # the EvalRun settles what it spent.
        return True, None
    if list(run.status.get("spendReservations") or []) != names:
        intent = rs.pending(f"reserving its cap on SpendQuota {', '.join(names)}")
        await status.write(st, run, intent, {"spendReservations": names}, event=False)
    refusal = await spend.reserve_all(run, spec, workspace, names)
    if refusal is not None and refusal.hold is not None:
        refusal = await _held(st, run, spec, workspace, names, refusal)
    if refusal is None:
        return True, None
    if not refusal.verdict.final:
        # Kicked again when another Run of the namespace ends, and by the quota loop.
        st.waiting.setdefault(run.namespace, set()).add(run.uid)
    await status.write(st, run, refusal.verdict)
    return False, refusal.recheck


async def _under_eval_run(st: RunState, run: RunView, names: list[str], evalrun: str) -> bool:
    """Whether ``run`` starts under EvalRun ``evalrun``'s live up-front reservation on every
    quota of ``names``: only when that EvalRun (the uid of the reservation, which only the
    operator writes) proves it created the Run, by the ledger or its ``status.createdUids``
    (the EvalRuns index: no API call). Else it reserves its own cap."""
    holder = await spend.reservation_of(run.namespace, names, eval_run_spender(evalrun))
    if holder is None:
        return False
    owner = er.target(run.namespace, evalrun, holder)
    remembered = st.resolver.ledger.proof(owner, {}).created  # its record on its way
    found = (st.idx.eval_runs or {}).get(holder) or ()
    recorded = next((dict(e.get("createdUids") or {}) for e in found), {})
    return er.proven(recorded, remembered, run.name, run.uid)


async def _held(
    st: RunState,
    run: RunView,
    spec: RunSpec,
    workspace: WorkspaceSpec,
    names: list[str],
    refusal: spend.Refusal,
) -> spend.Refusal | None:
    """The hold's Review: open it, or act on its decision."""
    assert refusal.hold is not None
    name = quota.hold_review_name(run.name, run.uid)
    review = await k8s.get_custom("reviews", run.namespace, name)
    if review is not None:
        await st.reviews.adopt(review)  # the operator's own, or TamperedObject
    else:
        cap = quota.run_cap(spec, workspace)
        manifest = quota.build_hold_review(run_ref(run, spec), refusal.hold, refusal.message, cap)
        await st.reviews.open(manifest)
    found = decision_of(review) if review is not None else None
    verdict: str | None = found.verdict if found is not None else None
    who = found.decided_by if found is not None else ""
    if verdict is None and review is not None:
        # The agent of the Run that started this one may clear the hold (approve_spend).
        by_agent = spend_approval.approver(st, run)
        if by_agent is not None:
            verdict, who = "approve", by_agent[0]
    if verdict == "approve":
        granted = await spend.reserve_all(run, spec, workspace, names, held=True)
        if granted is None:
            await _taken_up(st, run.namespace, name, "approve", who)
        return granted
    if verdict is not None:
        await _taken_up(st, run.namespace, name, verdict, who)
        message = f"{refusal.message}; its hold (Review {name}) was {verdict}ed by {who}"
        return spend.Refusal(rs.final(REASON_BUDGET_EXHAUSTED, message))
    message = (
        f"{refusal.message}; held: Review {name} (kind spend) asks a person to let it start "
        "past the limit"
    )
    verdict_ = rs.Verdict(
        phase="Pending", status="Unknown", reason=REASON_BUDGET_HOLD, message=message
    )
    return spend.Refusal(verdict_, refusal.recheck)


async def _taken_up(st: RunState, namespace: str, review: str, verdict: str, who: str) -> None:
    """The Reviews controller records the decision the hold was taken up with."""
    await st.reviews.transition(namespace, review, Transition("Decided", verdict, who))
