"""The start-up waits for an API server that answers before it LISTs anything.

A restarted kube-apiserver refuses connections, then answers 403 to every request until
its RBAC authorizer's caches fill; an operator (re)started then used to fail its start-up
and sit out kopf's 60 s retry. ``k8s.wait_for_api`` polls the discovery document until it
is served. Here a real HTTP server on loopback plays the API server's first seconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from pathlib import Path

import pytest

from swarmkit_operator import k8s
from tests.support.http_server import HttpRequest, RecordingHttpServer
from tests.support.kubeconfigs import token_kubeconfig

PATH = "/apis/swarmkit.dev/v1alpha1"


async def _closing(call: Awaitable[float]) -> float:
    try:
        return await call
    finally:
        await k8s.close_connections()


def test_it_waits_through_a_warming_authorizer_and_logs_once(
    kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def warming(request: HttpRequest) -> tuple[int, object]:
        if len(server.requests) <= 3:
            return 403, {"kind": "Status", "message": "clusterrole.rbac... not found"}
        return 200, {"kind": "APIResourceList", "groupVersion": "swarmkit.dev/v1alpha1"}

    with RecordingHttpServer(warming) as server:
        k8s.configure(kubeconfig=token_kubeconfig(kubeconfig, server.url))
        with caplog.at_level(logging.WARNING):
            waited = asyncio.run(_closing(k8s.wait_for_api(PATH, max_delay=0.5)))
    assert [r.path for r in server.requests] == [PATH] * 4
    assert 0.25 + 0.5 + 0.5 <= waited < 5  # three waits, doubling up to max_delay
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "HTTP 403" in warnings[0] and PATH in warnings[0]


def test_it_waits_while_nothing_listens_then_returns_once_served(kubeconfig: Path) -> None:
    with RecordingHttpServer() as probe:
        port = int(probe.url.rsplit(":", 1)[1])  # free, then closed: connections refused
    k8s.configure(kubeconfig=token_kubeconfig(kubeconfig, f"http://127.0.0.1:{port}"), retries=0)
    server = RecordingHttpServer(port=port)

    async def scenario() -> float:
        waiting = asyncio.create_task(k8s.wait_for_api(PATH, max_delay=0.3))
        await asyncio.sleep(1.2)
        assert not waiting.done()  # nothing listens: still waiting
        server.start()
        try:
            return await asyncio.wait_for(waiting, timeout=10)
        finally:
            await k8s.close_connections()

    try:
        waited = asyncio.run(scenario())
    finally:
        server.close()
    assert [r.path for r in server.requests] == [PATH]
    assert 1.2 <= waited < 3
