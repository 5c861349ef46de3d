"""kopf handlers, one module per kind (``kopf run -m swarmkit_operator.handlers``).

Importing this package registers every handler with kopf's default registry: the shared
settings, work queue and ConfigMap/GC handlers (``common``), the login (``login``), one
module per reconciled kind (``workspace``, ``skill``, ``agent``, ``topology``) and the Runs
handlers (``run``, ``schedule``). Every handlers module that exists is imported here, explicitly.
"""

from . import agent, common, login, run, schedule, skill, topology, workspace  # noqa: F401
