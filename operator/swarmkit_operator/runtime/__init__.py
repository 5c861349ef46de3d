"""What the operator does itself beside kopf: leader election and the manager that starts
the writing loops only in the leader (``docs/design/operator-runtime.md`` says why)."""

from .leader import LeaderElector, Leadership, LeaseSettings
from .manager import Manager, lease_settings_from_env, manager_of

__all__ = [
    "LeaderElector",
    "Leadership",
    "LeaseSettings",
    "Manager",
    "lease_settings_from_env",
    "manager_of",
]
