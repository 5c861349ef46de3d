"""kopf handlers, one module per kind (``kopf run -m swarmkit_operator.handlers``).

Importing this package registers every handler with kopf's default registry: the shared
settings, start-up and ConfigMap handlers (``common``), one module per reconciled kind
(``workspace``, ``skill``, ``agent``, ``topology``), the Runs handlers (``run``,
``schedule``), the Agent MCP gateways (``gateway``), then the skill library and web view
(``library``), and last the opening of the watch streams (``streams``), which hands over
to the manager (:mod:`swarmkit_operator.runtime`): it starts the writers once this replica
leads. Login is kopf's own
(the service account in a pod, else the kubeconfig).
Every handlers module that exists is imported here, explicitly. The reconcile machinery
they drive is kopf-free: :mod:`swarmkit_operator.reconcile`.
"""

# ``common`` first: its start-up handler, its ConfigMap indexes and the watch installer for
# other modules' indexes are registered before any kind module's, as they always were.
from . import common  # noqa: F401

# isort: split
from . import (  # noqa: F401
    agent,
    funnel,
    gateway,
    review,
    run,
    schedule,
    skill,
    topology,
    workspace,
)

# isort: split
# After ``run``: the library's start-up reads the Runs index and counts finished Runs.
from . import library  # noqa: F401

# isort: split
# Last: the watch streams open once every start-up handler has run.
from . import streams  # noqa: F401
