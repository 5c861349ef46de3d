"""What the operator does itself beside kopf: leader election, the manager that starts the
runnables (the writers only in the leader) and the one rate-limited work queue
(``docs/design/operator-runtime.md`` says why)."""

from .leader import LeaderElector, Leadership, LeaseSettings
from .manager import Manager, Periodic, Runnable, lease_settings

__all__ = [
    "LeaderElector",
    "Leadership",
    "LeaseSettings",
    "Manager",
    "Periodic",
    "Runnable",
    "lease_settings",
]
