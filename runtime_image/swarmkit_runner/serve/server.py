"""Starting the served topology's server, and draining it on SIGTERM.

The listening socket is opened here with ``SO_REUSEPORT``: a new replica may bind the
port while an old one on the same network namespace still drains (the local process node
runs every pod on the host's loopback; on a cluster each pod has its own address anyway).

On SIGTERM (a rollout, a scale-down): readiness turns 503 at once (the Service stops
sending new calls), new tasks get 503 + Retry-After, running tasks may finish for up to
``--drain-seconds``; the rest are cancelled and end in state ``canceled``. The server
then answers for :data:`LINGER_SECONDS` more (a caller polling ``tasks/get`` sees the
final state) and exits 0. A second signal exits at once.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from types import FrameType

import uvicorn

from swarmkit_api.bundle import SERVE_TOKEN_ENV_PREFIX

from .. import spans
from ..audit import AuditLog, warn_short_secrets
from ..bundle import load_mounted
from ..errors import BundleError
from ..listen import listen_socket
from ..paths import RunnerPaths
from ..result import EXIT_BAD_BUNDLE
from ..secrets import SecretStore
from .app import ServeState, build_app
from .metrics import ServeMetrics
from .tasks import TaskManager

LINGER_SECONDS = 3.0


def accepted_tokens(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """The bearer tokens the operator injected (``SWARMKIT_SECRET_SERVE_TOKEN_<n>``)."""
    return [
        v.strip()
        for k, v in sorted(environ.items())
        if k.startswith(SERVE_TOKEN_ENV_PREFIX) and v.strip()
    ]


class DrainingServer(uvicorn.Server):
    """uvicorn, with SIGTERM/SIGINT starting a drain instead of stopping at once."""

    def __init__(self, config: uvicorn.Config, manager: TaskManager, drain_seconds: float):
        super().__init__(config)
        self.manager = manager
        self.drain_seconds = drain_seconds
        self.loop: asyncio.AbstractEventLoop | None = None
        self._drain: asyncio.Task[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._drain is not None or self.loop is None:
            super().handle_exit(sig, frame)  # second signal: stop now
            return
        self.loop.call_soon_threadsafe(self._start_drain)

    def _start_drain(self) -> None:
        if self._drain is None:
            self._drain = asyncio.get_running_loop().create_task(self.drain())

    async def drain(self) -> None:
        started = time.monotonic()
        active = self.manager.active
        print(
            f"swarmkit-runner serve: draining ({active} task(s) running, up to "
            f"{self.drain_seconds:g}s)",
            file=sys.stderr,
            flush=True,
        )
        finished, cancelled = await self.manager.drain(started + self.drain_seconds)
        print(
            f"swarmkit-runner serve: drained: {finished} finished, {cancelled} cancelled",
            file=sys.stderr,
            flush=True,
        )
        await asyncio.sleep(LINGER_SECONDS)
        self.should_exit = True


async def serve(
    paths: RunnerPaths,
    host: str,
    port: int,
    max_concurrent: int,
    drain_seconds: float,
    input_timeout: float,
) -> int:
    secrets = SecretStore()
    try:
        # Only the very file the operator wrote (its Deployment's SWARMKIT_BUNDLE_SHA256),
        # and the skill files mounted beside it as the operator rendered them.
        bundle = load_mounted(paths)
    except BundleError as exc:
        print(f"swarmkit-runner serve: {exc}", file=sys.stderr)
        return EXIT_BAD_BUNDLE
    if bundle.target_kind != "Topology":
        print("swarmkit-runner serve: the bundle's target is not a Topology", file=sys.stderr)
        return EXIT_BAD_BUNDLE
    tokens = accepted_tokens(os.environ)
    for token in tokens:
        secrets.remember(token)
    if not tokens:
        print(
            f"swarmkit-runner serve: no bearer token ({SERVE_TOKEN_ENV_PREFIX}<n>) is set: "
            "every call will be refused",
            file=sys.stderr,
        )
    metrics = ServeMetrics()
    manager = TaskManager(
        bundle=bundle,
        paths=paths,
        secrets=secrets,
        metrics=metrics,
        max_concurrent=max_concurrent,
        input_timeout=input_timeout,
    )
    version = bundle.topologies[bundle.target].version
    state = ServeState(bundle, manager, metrics, tokens, version)
    config = uvicorn.Config(
        build_app(state),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=5,
    )
    # Tracing hook: a server span per A2A call, in the caller's trace (OTLP env set).
    tracing = spans.enable_from_env(
        os.environ, secrets, "swarmkit-serve", {"swarmkit.topology": bundle.target}
    )
    server = DrainingServer(config, manager, drain_seconds)
    server.loop = asyncio.get_running_loop()
    sock = listen_socket(host, port)
    audit = AuditLog(f"serve-{bundle.target}", bundle.run.correlation_id or bundle.run.uid, secrets)
    warn_short_secrets(audit, secrets)
    audit.emit(
        "serve.start",
        topology=bundle.target,
        version=version,
        address=f"{host}:{sock.getsockname()[1]}",
        max_concurrent_tasks=max_concurrent,
        skills=len(bundle.skills),
    )
    try:
        await server.serve(sockets=[sock])
    finally:
        tracing.shutdown()
    return 0


__all__ = ["DrainingServer", "accepted_tokens", "serve"]
