"""Fault injection for reliability tests: stop one control-plane component and start it again.

``stop_component(cluster, "kube-apiserver")`` SIGTERMs the component's process group (SIGKILL
after a grace period, or at once with ``kill=True``) and keeps everything else running;
``start_component`` starts it again with the command line, log file and state (etcd's data
directory, the apiserver's port and certificates) it had, and waits until it answers its
health endpoint. Between the two, clients see exactly what a crashed or restarted component
shows them: refused connections (apiserver) or 5xx/timeouts from the apiserver (etcd).

Only etcd and kube-apiserver are supported: they are what the reliability suite restarts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

from swarmkit_devcluster.procs import tail

if TYPE_CHECKING:
    from swarmkit_devcluster.cluster import LocalCluster

RESTARTABLE = ("etcd", "kube-apiserver")


class FaultError(RuntimeError):
    """A component could not be stopped or did not come back; the message says which."""


def _check(name: str) -> None:
    if name not in RESTARTABLE:
        raise FaultError(f"{name!r} cannot be restarted here; choose one of {RESTARTABLE}")


def stop_component(cluster: LocalCluster, name: str, *, kill: bool = False) -> None:
    """Stop ``name`` (its whole process group); the rest of the cluster keeps running."""
    _check(name)
    with cluster._locked():
        cluster._load()
        proc = cluster._procs().get(name)
        if proc is None or not proc.alive():
            raise FaultError(f"{name} is not running in {cluster.state_dir}")
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        deadline = time.monotonic() + 10
        while proc.alive() and time.monotonic() < deadline:
            cluster._reap(name)
            time.sleep(0.05)
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        cluster._reap(name)
        deadline = time.monotonic() + 5
        while proc.alive() and time.monotonic() < deadline:
            cluster._reap(name)
            time.sleep(0.05)
        if proc.alive():
            raise FaultError(f"{name} (pid {proc.pid}) did not stop")


def _health_url(cluster: LocalCluster, name: str) -> str:
    if name == "etcd":
        return f"http://127.0.0.1:{cluster.state['ports']['etcd_client']}/health"
    return f"{cluster.server}/readyz"


def _healthy(cluster: LocalCluster, name: str) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    headers = cluster.client()._headers(None) if name == "kube-apiserver" else {}
    req = urllib.request.Request(_health_url(cluster, name), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def start_component(cluster: LocalCluster, name: str, *, timeout: float = 60) -> float:
    """Start ``name`` again as it was; return the seconds until it answered healthy."""
    _check(name)
    started = time.monotonic()
    with cluster._locked():
        cluster._load()
        proc = cluster._procs().get(name)
        if proc is None:
            raise FaultError(f"{name} was never started in {cluster.state_dir}")
        if proc.alive():
            raise FaultError(f"{name} is still running (pid {proc.pid}); stop it first")
        new = cluster._spawn(name, list(proc.cmd))
    while not _healthy(cluster, name):
        if not new.alive():
            raise FaultError(f"{name} exited on restart:\n{tail(cluster.log_path(name), 30)}")
        if time.monotonic() - started > timeout:
            raise FaultError(
                f"{name} not healthy {timeout:.0f}s after restart:\n"
                f"{tail(cluster.log_path(name), 30)}"
            )
        time.sleep(0.1)
    return time.monotonic() - started
