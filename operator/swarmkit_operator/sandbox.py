"""The sandbox runtime of the operator's pods: does their RuntimeClass exist?

A ``runtimeClassName`` (the Workspace's ``runtime.runtimeClassName``, or the root Agent's)
that names no RuntimeClass makes the apiserver refuse every pod, and a Job or Deployment
then says so only in its Events. The Runs, serve and gateway controllers ask here first
and report reason ``RuntimeClassNotFound`` instead. RuntimeClasses are not watched (one
``get`` per start, only when a name is set), so callers look again every
:data:`RECHECK_SECONDS`.
"""

from __future__ import annotations

from swarmkit_api.bundle import RunBundle

from . import k8s
from .builders.pod import runtime_class

RECHECK_SECONDS = 15.0


async def missing_runtime_class(bundle: RunBundle) -> str | None:
    """Why the bundle's pods cannot be created (their RuntimeClass is missing), or None."""
    name = runtime_class(bundle)
    if name is None or await k8s.get_runtime_class(name) is not None:
        return None
    return (
        f"RuntimeClass {name} not found (runtimeClassName of the Workspace's runtime or of "
        f"the root agent); the pods start once it exists"
    )
