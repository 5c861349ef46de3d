"""swarmkit-operator: reconciles swarmkit.dev resources into rendered config, Jobs and status.

Layers (see .importlinter): ``builders``, ``conditions``, ``config`` and ``hashing`` are
pure and never import kopf; ``k8s`` is the one module that talks to the
Kubernetes API; ``handlers`` hold one module per kind (its declaration: indexes, dependents and
reconciler) and the composition root; ``kopf`` only runs the entry point, lifecycle, probes
and logging (docs/design/operator-runtime.md).
"""
