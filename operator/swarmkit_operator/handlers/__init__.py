"""kopf glue (``kopf run -m swarmkit_operator.handlers``): one module per kind and the
composition root.

Importing this package registers the composition root's start-up, cleanup and probe
handlers with kopf (:mod:`.root`); nothing else is registered by an import. The root
collects the kinds declared in :data:`.root.KINDS` (one ``Kind`` per reconciled kind, in
its module: ``workspace``, ``skill``, ``agent``, ``funnel``, ``topology``) and the marked
functions (``@index``, ``@on_event``) of the modules it names (:data:`.root.MODULES`), in
its written order: the shared ConfigMap watch (``common``), the kinds' modules, then the
reviews (``review``), the Runs (``run``), the Agent MCP gateways (``gateway``), the mailbox
webhook deliveries (``delivery``) and the skill library (``library``). The machinery they
drive is kopf-free (:mod:`swarmkit_operator.reconcile`, :mod:`swarmkit_operator.runs`,
:mod:`swarmkit_operator.runtime`). Login is kopf's own (the service account in a pod,
else the kubeconfig).
"""

from . import root  # noqa: F401
