"""The reconcile loop for Workspaces, Skills, Agents, Funnels and Topologies, without kopf.

How reconciling works
---------------------
Each reconciled kind is declared once (:class:`~.controller.Kind`, in its module of
``swarmkit_operator.handlers``; the composition root lists them in ``KINDS``). The
operator's own watch streams (:mod:`swarmkit_operator.k8s.streams`, one reflector per
resource and watched namespace, opened by the composition root ``handlers.root``) hand
every event of a kind's objects to its one event function
(``handlers.common.kind_event``). It keeps in-memory **indexes**
(:mod:`swarmkit_operator.indexes`, filled by one paged LIST at start-up) of what the
reconcilers need: per object a small *view* (:mod:`.views`: spec and status fields), and
reverse indexes for fan-out (skill → agents
granting it, agent → topologies using it, ConfigMap → workspaces taking flow data, topology →
skills calling it, ...). Then it **enqueues keys** ``(kind, namespace, name)`` into the
work queue (:mod:`swarmkit_operator.runtime.workqueue`, a lane per kind): the object itself
when its spec changed (never for its own status echo), and its dependents (the kind's
``dependents``, through the reverse indexes, never by scanning) when what they compare
changed.

The :class:`~.controller.Controller` is in typed parts: how it runs
(:class:`~.controller.ControllerSettings`, parsed once from the operator's settings), what
its reconcilers call (:class:`~.controller.Services`, given to its constructor), and what
it remembers per object and per rendered ConfigMap (:mod:`.book`). Indexes are read by
their :class:`~swarmkit_operator.indexes.IndexId`, never by a string.

A few workers of the :class:`~.controller.Controller` take keys off the queue (workspaces,
then skills, then agents, then topologies, then garbage collection, :mod:`.gc`), one key at
a time per key, and run the kind's reconciler: it reads the indexes, calls the pure
builders, creates the content-addressed ConfigMap if it is missing and applies ``status``
(server-side apply, one field manager per controller) if it differs (:mod:`.status`).
Everything is level-triggered and idempotent, so an operator restart recomputes the same
statuses (no writes), errors are retried by the queue (rate-limited, the same rule for
every controller), and nothing is kept in a status field as a hidden state machine.

A reconciler *defers* (and is retried shortly) while an input it would read is itself still
queued or has an unobserved write, so an Agent is versioned once with its skills' final
hashes rather than once per skill landing. kopf neither watches nor writes our objects: it
runs the entry point, the start-up and clean-up handlers, the probes and logging.

Nothing here imports kopf (import-linter contract ``kopf-allow-list``). The kind modules in
``swarmkit_operator.handlers`` declare their kinds (and mark their index functions);
``handlers.root`` builds the controller from the declarations in kopf's start-up handler,
and opens the watch streams that feed it.
"""
