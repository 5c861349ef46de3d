"""The budget gate of a Run's start: reserve its cap on the SpendQuotas that cover it.

Called by :func:`.start.start` once the target is resolved and before anything is created.
The quotas' names are written to ``status.spendReservations`` *before* reserving, so a crash
at any point leaves a Run whose reservations are found again (reserving is idempotent per
Run uid, see :mod:`swarmkit_operator.builders.spend`).
"""

from __future__ import annotations

from swarmkit_api.run import RunSpec
from swarmkit_api.workspace import WorkspaceSpec

from ..builders import run_status as rs
from . import spend, status
from .model import RunView
from .state import RunState


async def gate(
    st: RunState, run: RunView, spec: RunSpec, workspace: WorkspaceSpec
) -> tuple[bool, float | None]:
    """(may start now, recheck after seconds): reserved, or waiting / failed on a quota."""
    names = await spend.covering(run.namespace, spec)
    if not names:
        return True, None
    if list(run.status.get("spendReservations") or []) != names:
        intent = rs.pending(f"reserving its cap on SpendQuota {', '.join(names)}")
        await status.write(st, run, intent, {"spendReservations": names}, event=False)
    refusal = await spend.reserve_all(run, spec, workspace, names)
    if refusal is None:
        return True, None
    if not refusal.verdict.final:
        # Kicked again when another Run of the namespace ends, and by the quota loop.
        st.waiting.setdefault(run.namespace, set()).add(run.uid)
    await status.write(st, run, refusal.verdict)
    return False, refusal.recheck
