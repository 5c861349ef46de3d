"""``python -m swarmkit_runner serve`` as a real subprocess on a free loopback port.

::

    with ServedRunner(layout, tokens=["tok"]) as served:
        served.card_url            # http://127.0.0.1:<port>/.well-known/agent-card.json
        served.audit()             # the audit lines it printed so far
        served.terminate()         # SIGTERM: drain, then exit
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any

import httpx

from .bundles import BundleLayout
from .runner import parse_audit, runner_env

TOKEN_ENV = "SWARMKIT_SECRET_SERVE_TOKEN_"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServedRunner:
    """The served-topology server of ``layout`` in a subprocess."""

    def __init__(
        self,
        layout: BundleLayout,
        tokens: Iterable[str] = ("test-token",),
        max_concurrent: int = 4,
        drain_seconds: float = 10.0,
        input_timeout: float = 60.0,
        env: dict[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        self.layout = layout
        self.tokens = list(tokens)
        self.port = port or free_port()
        self.args = [
            sys.executable,
            "-m",
            "swarmkit_runner",
            "serve",
            "--bundle",
            str(layout.bundle_dir),
            "--skills-dir",
            str(layout.skills_dir),
            "--scratch",
            str(layout.scratch),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--max-concurrent-tasks",
            str(max_concurrent),
            "--drain-seconds",
            str(drain_seconds),
            "--input-timeout",
            str(input_timeout),
        ]
        self.env = runner_env(
            {**{f"{TOKEN_ENV}{i}": t for i, t in enumerate(self.tokens)}, **(env or {})}
        )
        self.proc: subprocess.Popen[str] | None = None
        self._out: list[str] = []
        # Closed in __exit__ (it outlives start(): stderr is read after the process ends).
        self._err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self._reader: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def card_url(self) -> str:
        return f"{self.base_url}/.well-known/agent-card.json"

    def start(self, timeout: float = 60.0) -> ServedRunner:
        self.proc = subprocess.Popen(
            self.args, env=self.env, stdout=subprocess.PIPE, stderr=self._err, text=True
        )
        assert self.proc.stdout is not None
        stdout = self.proc.stdout

        def read() -> None:
            for line in stdout:
                self._out.append(line)

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited {self.proc.returncode}: {self.stderr()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/readyz", timeout=1.0).status_code == 200:
                    return self
            time.sleep(0.1)
        raise TimeoutError(f"serve not ready after {timeout}s: {self.stderr()}")

    def stderr(self) -> str:
        self._err.seek(0)
        return self._err.read()

    def audit(self) -> list[dict[str, Any]]:
        return parse_audit("".join(self._out))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.audit() if e.get("event") == name]

    def events_after(self, name: str, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The ``name`` events once at least ``count`` arrived (the process's stdout is read
        by a thread: a line written before an answer may be read just after it)."""
        deadline = time.monotonic() + timeout
        found = self.events(name)
        while len(found) < count and time.monotonic() < deadline:
            time.sleep(0.05)
            found = self.events(name)
        return found

    def metrics(self) -> str:
        return httpx.get(f"{self.base_url}/metrics", timeout=5.0).text

    def terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout=timeout)
        if self._reader is not None:
            self._reader.join(timeout=5)
        return code

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait(timeout=10)

    def __enter__(self) -> ServedRunner:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self._err.close()
