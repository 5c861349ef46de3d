"""The reconcile loop for Workspaces, Skills, Agents and Topologies, without kopf.

How reconciling works
---------------------
kopf watches the resources. The ``@kopf.on.event`` handlers (``swarmkit_operator.handlers``)
keep in-memory **indexes** (:mod:`swarmkit_operator.indexes`, filled by one paged LIST at
start-up) of what the reconcilers need: per object a small *view* (:mod:`.views`: spec and
status fields), and reverse indexes for fan-out (skill → agents granting it, agent →
topologies using it, secret → workspaces referencing it, topology → skills calling it,
...). Then they **enqueue keys** ``(kind, namespace, name)`` into the work queue
(:mod:`.workqueue`): the object itself when its spec changed, and its dependents (found
through the reverse indexes, never by scanning) when what they depend on changed.

A few workers of the :class:`~.controller.Controller` take keys off the queue (workspaces,
then skills, then agents, then topologies, then garbage collection, :mod:`.gc`), one key
at a time per key, and run the kind's reconciler: it reads the indexes, calls the pure
builders, creates the content-addressed ConfigMap if it is missing and merge-patches
``status`` if it differs (:mod:`.status`). Everything is level-triggered and idempotent, so
an operator restart recomputes the same statuses (no writes), errors are retried with
exponential backoff, and nothing is kept in a status field as a hidden state machine.

A reconciler *defers* (and is retried shortly) while an input it would read is itself still
queued or has an unobserved write, so an Agent is versioned once with its skills' final
hashes rather than once per skill landing. kopf itself never writes to our objects: there
are no change-detecting handlers (no diff-base, no progress, no finalizers). Its storages
are nevertheless pointed at ``status.kopf`` so nothing ever lands in annotations.

Nothing here imports kopf (import-linter contract ``kopf-in-handlers``). The kind modules
in ``swarmkit_operator.handlers`` register their indexes and reconcilers with this
machinery (marks the composition root collects); ``handlers.root`` builds and starts it
from kopf's start-up handler.
"""
