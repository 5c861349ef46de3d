"""PID 1 of the runner's container: reaps orphans and forwards signals, sealed like the runner.

The image's entrypoint is ``python -m swarmkit_runner`` itself, not ``tini -- python -m
swarmkit_runner``: tini kept the container's original environment block, every
``SWARMKIT_SECRET_*`` value included, and ran under the runner's uid, so any script, bash
call or MCP server could read the secrets from ``/proc/<tini>/environ`` (issue 46, item 3).
When the runner finds itself PID 1 (a container with its own PID namespace) it has already
sealed itself (:func:`~.secrets.seal_process`: values masked in the block, process
non-dumpable); it then forks. The child goes on as the runner; the parent stays PID 1 and
does what tini did: it forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to
the runner, reaps every orphan that re-parents to it (a killed MCP server's children) and
exits with the runner's status (128 + n when the runner died of signal n). The fork keeps
the seal: neither process is readable by anything the runner starts.

Not PID 1 (the process node without PID namespaces, a test): nothing to do; orphans go to
whoever is init there.
"""

from __future__ import annotations

import contextlib
import os
import signal

FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)


def become_init() -> None:
    """Fork when PID 1: return in the child (the runner); the parent never returns."""
    if os.getpid() != 1:
        return
    worker = os.fork()
    if worker == 0:
        return

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signum)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    os._exit(_reap_until(worker))


def _reap_until(worker: int) -> int:
    """Reap every child until ``worker`` exits; its exit code as a shell reports it."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1  # the worker is gone without us seeing it: cannot happen, fail loudly
        if pid == worker:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code
