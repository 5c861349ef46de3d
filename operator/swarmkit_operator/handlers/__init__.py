"""kopf handlers, one module per kind (``kopf run -m swarmkit_operator.handlers``).

Importing this package registers every handler with kopf's default registry: the shared
settings and work queue (``common``), then one module per kind. Every handlers module that
exists is imported here, explicitly.
"""

from . import agent, common, skill, topology, workspace  # noqa: F401  (registration)

# The Runs handlers register here too (owned by the Runs work):
from . import run, schedule  # noqa: E402, F401  (registration)
