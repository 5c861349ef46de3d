"""swarmkit_runner: the process inside every Run's Job.

``python -m swarmkit_runner run --bundle DIR`` loads the mounted run bundle (validated with
the shared :mod:`swarmkit_api` model), runs the target topology's root agent (or the single
agent) against its model provider with a default-deny tool catalog, writes one JSON audit
line per event to stdout and the :class:`swarmkit_api.bundle.RunResult` to the termination
log.

Layer rule: this package imports only :mod:`swarmkit_api` of the project's packages (never
kopf or kubernetes). The ``mcp`` SDK is imported lazily, only when a run needs a server.
"""

__version__ = "0.1.0"
