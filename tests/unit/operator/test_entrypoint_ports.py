"""A port clash ends operator start-up with one clear line instead of a lingering kopf."""

from __future__ import annotations

import socket
import subprocess
import sys

from swarmkit_operator.__main__ import _unbindable
from swarmkit_operator.webview import parse_address


def test_taken_liveness_port_is_named() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        problem = _unbindable(f"http://127.0.0.1:{port}/healthz")
        assert problem is not None and f"127.0.0.1:{port}" in problem
        # The entry point exits 2 at once with that message, before talking to any cluster.
        out = subprocess.run(
            [sys.executable, "-m", "swarmkit_operator", "--metrics-port", "0",
             "--liveness", f"http://127.0.0.1:{port}/healthz"],
            capture_output=True, text=True, timeout=60,
            env={"KUBECONFIG": "/nonexistent", "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert out.returncode == 2, out.stderr
        assert f"--liveness http://127.0.0.1:{port}/healthz" in out.stderr


def test_free_port_and_disabled_endpoint_are_fine() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert _unbindable(f"http://127.0.0.1:{port}/healthz") is None
    assert _unbindable("") is None


def test_malformed_liveness_url_says_what_is_expected() -> None:
    assert _unbindable("localhost:8080") == "expected http://HOST:PORT/PATH"


def _operator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "swarmkit_operator", "--metrics-port", "0", "--liveness", "",
         *args],
        capture_output=True, text=True, timeout=60,
        env={"KUBECONFIG": "/nonexistent", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_web_view_address_is_checked_before_start_up() -> None:
    out = _operator("--web-view", "localhost")
    assert out.returncode == 2
    assert "--web-view: expected HOST:PORT, got 'localhost'" in out.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _operator("--web-view", f"127.0.0.1:{port}")
        assert out.returncode == 2
        assert f"--web-view 127.0.0.1:{port}: cannot listen on 127.0.0.1:{port}" in out.stderr


def test_a_per_user_web_view_listens_on_loopback_only() -> None:
    """Per user, the view trusts the proxy's identity headers: only the pod may reach it."""
    out = _operator("--web-view", "0.0.0.0:8082")
    assert out.returncode == 2
    assert "a per-user web view trusts the identity headers" in out.stderr
    assert "--web-view-single-user" in out.stderr


def test_web_view_address_forms() -> None:
    assert parse_address("0.0.0.0:8082") == ("0.0.0.0", 8082)
    assert parse_address(":8082") == ("127.0.0.1", 8082)  # no host: loopback, not everywhere
    assert parse_address("[::1]:8082") == ("::1", 8082)
    for bad in ("8082", "host:", "host:99999", "host:http"):
        try:
            parse_address(bad)
        except ValueError as exc:
            assert "expected HOST:PORT" in str(exc)
        else:
            raise AssertionError(f"{bad!r} was accepted")
