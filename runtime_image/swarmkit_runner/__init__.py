"""swarmkit_runner: the process inside every Run's Job.

``python -m swarmkit_runner run --bundle DIR`` loads the mounted run bundle (validated with
the shared :mod:`swarmkit_api` model), runs the target topology's root agent (or the single
agent) against its model provider with a default-deny tool catalog, writes one JSON audit
line per event to stdout and the :class:`swarmkit_api.bundle.RunResult` to the termination
log.

Layer rule: this package imports only :mod:`swarmkit_api` of the project's packages (never
kopf or kubernetes). Start-up cost: heavy libraries are imported only by the runs that need
them: ``mcp`` and ``anyio`` when a run has an MCP server, ``httpx`` for HTTP model providers,
HTTP tools, web search and A2A, ``jsonschema`` when something is validated against a schema
(``tests/unit/runner/test_startup_imports.py``).
"""

__version__ = "0.1.0"

import sys as _sys

# httpx's package __init__ imports its command-line client (httpx._main: click, rich,
# pygments; ~90 ms of every runner start-up) whenever click is installed, which uvicorn needs.
# The runner never uses that client; a None entry in sys.modules makes the import fail and
# httpx falls back to its stub `main` (its own documented behaviour without the CLI extras).
if "httpx" not in _sys.modules:
    _sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
