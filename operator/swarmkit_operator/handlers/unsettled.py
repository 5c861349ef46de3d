"""The last start-up step: reconcile what changed while no operator ran, at once.

Every other start-up handler has run by now (this module is imported last), so the
indexes are complete (the shared start-up LISTed them) and the skill library is loaded.
Objects created or edited while the operator was down (their ``observedGeneration`` lags
their ``generation``) are enqueued here, before the watches start and list everything
again: after a restart with 5,000 objects a new one is reconciled in the time it takes to
start, not behind kopf's listing of all of them. The rest are checked in the background
once their listing event arrives (see :class:`~swarmkit_operator.reconcile.WorkQueue`).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from ..reconcile.controller import controller_of

log = logging.getLogger("swarmkit_operator")


@kopf.on.startup()
async def reconcile_unsettled(memo: kopf.Memo, **_: Any) -> None:
    ctl = controller_of(memo)
    if ctl is None:
        raise RuntimeError("the shared start-up (handlers/common.py) must run first")
    count = ctl.enqueue_unsettled()
    if count:
        log.info("%d object(s) changed while no operator ran: reconciling them first", count)
