"""Runs: a Run becomes one Job in the runtime container; its outcome becomes conditions.

This package is the Runs controller without kopf: the kopf handlers
(:mod:`swarmkit_operator.handlers.run` and :mod:`~swarmkit_operator.handlers.schedule`)
keep its indexes current, kick Runs on watch events and start its loops; everything else
is here, one job per module, in the order a Run meets them:

* :mod:`.model` — names, tunables, :class:`RunView`, :class:`Indexes`, small pure helpers;
* :mod:`.summaries` — what the indexes keep of each watched object;
* :mod:`.state` — what the controller remembers between reconciles (hints, caches);
* :mod:`.controller` — :class:`RunController`: one coalescing worker per kicked Run;
* :mod:`.observe` — one reconcile: finished, cancelled, not started, or derive the verdict
  from the Job and its pods (and recreate a lost Job);
* :mod:`.start` — the runner-workload pipeline for a Run (:mod:`swarmkit_operator.workload`:
  the target resolved by the operator's one resolver, the bundle ConfigMap, the
  NetworkPolicy and the Job, and a lost Job's replacement);
* :mod:`.status` — writing a verdict to ``status`` (Event, finish hooks);
* :mod:`.cleanup` — pod outcome finalizers, the finished label, forgetting deleted Runs;
* :mod:`.schedule` and :mod:`.retention` — scheduled Runs, and deleting finished ones.

Nothing about a Run lives only in memory: after an operator restart the indexes are
re-listed before any reconcile runs, and every decision is recomputed from the API objects.
"""

from .controller import RunController
from .model import Indexes, RunView

__all__ = ["Indexes", "RunController", "RunView"]
