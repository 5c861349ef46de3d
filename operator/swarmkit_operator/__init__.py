"""swarmkit-operator: reconciles swarmkit.dev resources into rendered config, Jobs and status.

Layers (see .importlinter): ``crdgen``, ``builders``, ``conditions``, ``config`` and
``hashing`` are pure and never import kopf; ``k8s`` is the one module that talks to the
Kubernetes API; ``handlers`` are thin kopf handlers, one module per kind.
"""
