"""Run retention: deleting finished Runs (TTL and ``historyLimit``).

Every ``retention_sweep_seconds`` (:class:`~swarmkit_operator.config.RunsSettings`), and
right after a Run finishes (the composition root pokes this
:class:`~swarmkit_operator.runtime.Periodic` from the controller's ``on_finished``):

* ``runtime.runTtlSecondsAfterFinished`` of the run's Workspace: finished Runs older than
  that (since ``completionTime``) are deleted;
* a Topology's ``historyLimit {succeeded, failed}`` keeps that many finished Runs of each
  outcome (newest first) and deletes the rest; without a ``historyLimit`` only the
  Topology's *scheduled* Runs are trimmed (to the defaults, 10 and 10), manual Runs are kept.

A deleted Run takes its Job, pods and bundle ConfigMap with it (owner references).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from swarmkit_api.topology import HistoryLimit

from .. import k8s
from ..builders import run_status as rs
from ..conditions import get_condition
from . import passes
from .controller import RunController
from .model import one
from .schedule import SCHEDULED_LABEL

log = logging.getLogger("swarmkit_operator.schedule")

#: A sweep gives the event loop back after this many Runs: with thousands of finished Runs
#: one pass takes tens of milliseconds (more on a busy node), and Run starts must not wait.
SWEEP_BATCH = 100


def outcome_of(status: dict[str, Any]) -> str | None:
    """``succeeded`` / ``failed`` for a finished Run, None otherwise."""
    cond = get_condition(status.get("conditions"), rs.SUCCEEDED)
    if cond is None:
        return None
    return {"True": "succeeded", "False": "failed"}.get(str(cond.get("status")))


def history_victims(finished: Iterable[tuple[str, str, str]], limit: HistoryLimit) -> list[str]:
    """Names to delete among (name, outcome, completionTime) beyond the limits."""
    keep = {"succeeded": limit.succeeded, "failed": limit.failed}
    out: list[str] = []
    for outcome in ("succeeded", "failed"):
        group = sorted(
            (f for f in finished if f[1] == outcome), key=lambda f: (f[2], f[0]), reverse=True
        )
        out.extend(name for name, _, _ in group[keep[outcome] :])
    return out


def _agent_of(spec: dict[str, Any]) -> str:
    return str((spec.get("agentRef") or {}).get("name") or "")


class Retention:
    """Deletes finished Runs past their TTL or beyond their Topology's history limit."""

    def __init__(self, ctl: RunController) -> None:
        self.ctl = ctl

    def _workspace_ttl(
        self, namespace: str, spec: dict[str, Any], memo: dict[tuple[str, str, str], int | None]
    ) -> int | None:
        topo_ref = (spec.get("topologyRef") or {}).get("name")
        key = (namespace, "topology" if topo_ref else "agent", str(topo_ref or _agent_of(spec)))
        if key not in memo:
            memo[key] = self._lookup_ttl(namespace, spec)
        return memo[key]

    def _lookup_ttl(self, namespace: str, spec: dict[str, Any]) -> int | None:
        ws_name: str | None = None
        topo_ref = (spec.get("topologyRef") or {}).get("name")
        if topo_ref:
            topo = one(self.ctl.idx.topologies, (namespace, topo_ref))
            ws_name = (((topo or {}).get("spec") or {}).get("workspaceRef") or {}).get("name")
        else:
            agent = one(self.ctl.idx.agents, (namespace, (spec.get("agentRef") or {}).get("name")))
            ws_name = (agent or {}).get("workspace")
        if not ws_name:
            return None
        ws = one(self.ctl.idx.workspaces, (namespace, ws_name))
        runtime = ((ws or {}).get("spec") or {}).get("runtime") or {}
        ttl = runtime.get("runTtlSecondsAfterFinished")
        return int(ttl) if isinstance(ttl, int) else None

    async def sweep(self) -> None:
        now = datetime.now(UTC)
        groups: dict[tuple[str, str], list[tuple[str, str, str, bool]]] = {}
        doomed: list[tuple[str, str]] = []
        ttls: dict[tuple[str, str, str], int | None] = {}
        for i, uid in enumerate(list(self.ctl.idx.runs.keys())):
            if i % SWEEP_BATCH == SWEEP_BATCH - 1:
                await asyncio.sleep(0)
            r = self.ctl.run_view(str(uid))
            if r is None or r.deleting:
                continue
            outcome = outcome_of(r.status)
            if outcome is None:
                continue
            done = str(r.status.get("completionTime") or "")
            ttl = self._workspace_ttl(r.namespace, r.spec, ttls)
            finished_at = rs.parse_time(done)
            expired = ttl is not None and finished_at is not None
            if expired and ttl is not None and finished_at is not None:
                expired = (now - finished_at).total_seconds() >= ttl
            if expired:
                doomed.append((r.namespace, r.name))
                continue
            topo = (r.spec.get("topologyRef") or {}).get("name")
            if topo:
                scheduled = r.labels.get(SCHEDULED_LABEL) == "true"
                groups.setdefault((r.namespace, str(topo)), []).append(
                    (r.name, outcome, done, scheduled)
                )

        async def history(group: tuple[tuple[str, str], list[tuple[str, str, str, bool]]]) -> None:
            (namespace, topo), members = group
            view = one(self.ctl.idx.topologies, (namespace, topo))
            raw = ((view or {}).get("spec") or {}).get("historyLimit")
            if raw is not None:
                limit = HistoryLimit.model_validate(raw)
                candidates = [(n, o, d) for n, o, d, _ in members]
            else:
                limit = HistoryLimit()
                candidates = [(n, o, d) for n, o, d, s in members if s]
            doomed.extend((namespace, n) for n in history_victims(candidates, limit))

        async def delete(run: tuple[str, str]) -> None:
            if await k8s.delete_custom("runs", *run):
                log.info("deleted finished Run %s/%s (retention)", *run)

        await passes.each(
            "retention", list(groups.items()), history, lambda g: f"Topology {g[0][0]}/{g[0][1]}"
        )
        await passes.each("retention", doomed, delete, lambda r: f"Run {r[0]}/{r[1]}")
