"""A real Jaeger (v2, ``cmd/jaeger``) for the tests and the demo, built from Go modules.

* Build: the wrapper module ``hack/jaeger`` (``go.mod``/``go.sum`` committed; ``tools.go``
  pins ``github.com/jaegertracing/jaeger/cmd/jaeger``) is built once, with the committed
  ``go.sum`` (``GOSUMDB=off``), into
  ``~/.cache/swarmkit-operator/jaeger-<version>/jaeger`` under a lock of its own (another
  worktree may be building it right now: it waits). A cached build is a ``stat``.
* Run: :class:`Jaeger` writes a config file (an OpenTelemetry Collector config, which is
  what Jaeger v2 reads) with in-memory storage and every listener on a free loopback port
  (OTLP/HTTP, OTLP/gRPC, the query API/UI, the health check), starts the binary and waits
  until the query API answers. :meth:`Jaeger.trace` reads one trace back through the
  query API (``/api/traces/<id>``), the way the tests check what was exported.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from swarmkit_devcluster.build import (
    _NETWORK_HINTS,
    BuildError,
    _download,
    _go_env,
    _proxy_message,
    find_go,
)
from swarmkit_devcluster.locks import exclusive
from swarmkit_devcluster.paths import cache_root, hack_dir
from swarmkit_devcluster.procs import free_port

MODULE_DIR = "jaeger"
PACKAGE = "github.com/jaegertracing/jaeger/cmd/jaeger"


def jaeger_version() -> str:
    """The Jaeger version the wrapper module requires (from its ``go.mod``)."""
    gomod = (hack_dir() / MODULE_DIR / "go.mod").read_text()
    found = re.search(r"github\.com/jaegertracing/jaeger\s+(v\S+)", gomod)
    if found is None:
        raise BuildError(f"hack/{MODULE_DIR}/go.mod does not require {PACKAGE.rsplit('/', 2)[0]}")
    return found.group(1)


def jaeger_path() -> Path:
    return cache_root() / f"jaeger-{jaeger_version().lstrip('v')}" / "jaeger"


def build_jaeger(log: TextIO = sys.stderr) -> Path:
    """Build Jaeger unless it is cached; returns the binary's path."""
    target = jaeger_path()
    if target.is_file():
        return target
    module_dir = hack_dir() / MODULE_DIR
    with exclusive(cache_root() / ".jaeger.lock"):
        if target.is_file():
            return target
        go = find_go()
        env = _go_env(go)
        env.setdefault("GOSUMDB", "off")  # the committed go.sum pins every module
        print(f"  downloading Go modules for hack/{MODULE_DIR} ...", file=log, flush=True)
        _download(go, module_dir, env)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        print(f"  building jaeger ({PACKAGE}@{jaeger_version()}) ... minutes the first time",
              file=log, flush=True)  # fmt: skip
        start = time.monotonic()
        res = subprocess.run(
            [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(tmp), PACKAGE],
            cwd=module_dir,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if res.returncode != 0:
            err = res.stderr.strip()
            if any(h in err for h in _NETWORK_HINTS):
                raise BuildError(_proxy_message(env, err))
            raise BuildError(f"building jaeger failed:\n{err[-4000:]}")
        os.replace(tmp, target)
        print(f"  jaeger built in {time.monotonic() - start:6.1f}s  {target}", file=log, flush=True)
    return target


CONFIG = """\
# Written by swarmkit_devcluster.jaeger: Jaeger v2 with in-memory storage, loopback only.
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
{ui}  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:{health}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{otlp_grpc}
      http:
        endpoint: 127.0.0.1:{otlp_http}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""


#: A directory of built jaeger-ui assets (its ``index.html`` and ``static/``) the query
#: service serves as its web UI. The Go module has none (jaeger-ui is a separate project);
#: without it the query API works and the UI is Jaeger's placeholder page.
UI_ASSETS_ENV = "SWARMKIT_JAEGER_UI_ASSETS"


def ui_block(ui_assets: Path | None = None) -> str:
    """The ``jaeger_query`` lines serving ``ui_assets`` (default: $SWARMKIT_JAEGER_UI_ASSETS)
    as the UI; empty without one; an error for a directory with no ``index.html``."""
    if ui_assets is None and os.environ.get(UI_ASSETS_ENV):
        ui_assets = Path(os.environ[UI_ASSETS_ENV])
    if ui_assets is None:
        return ""
    if not (ui_assets / "index.html").is_file():
        raise BuildError(f"{ui_assets} has no index.html: not a jaeger-ui build ({UI_ASSETS_ENV})")
    # jaeger_query's `ui.assets_path` (cmd/query/app QueryOptions.UIConfig, v1.75.0).
    return f"    ui:\n      assets_path: {json.dumps(str(ui_assets.resolve()))}\n"


def render_config(ports: dict[str, int], ui_assets: Path | None = None) -> str:
    """The Jaeger config for ``ports`` (and the UI of :func:`ui_block`)."""
    return CONFIG.format(ui=ui_block(ui_assets), **ports)


@dataclass
class Jaeger:
    """One Jaeger process on free loopback ports (a context manager)."""

    binary: Path | None = None
    #: Built jaeger-ui assets to serve as the UI (see :data:`UI_ASSETS_ENV`).
    ui_assets: Path | None = None
    ports: dict[str, int] = field(default_factory=dict)
    workdir: Path | None = None
    _proc: subprocess.Popen[bytes] | None = None
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def otlp_http_endpoint(self) -> str:
        """The OTLP/HTTP base URL (``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
        return f"http://127.0.0.1:{self.ports['otlp_http']}"

    @property
    def query_url(self) -> str:
        """The query API and UI."""
        return f"http://127.0.0.1:{self.ports['query']}"

    def start(self, timeout: float = 60.0) -> Jaeger:
        binary = self.binary or build_jaeger()
        ui_block(self.ui_assets)  # a directory that is not a UI build: said before starting
        if self.workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="jaeger-")
            self.workdir = Path(self._tmp.name)
        for name in ("otlp_http", "otlp_grpc", "query", "query_grpc", "health"):
            self.ports.setdefault(name, free_port())
        config = self.workdir / "jaeger.yaml"
        config.write_text(render_config(self.ports, self.ui_assets))
        log = (self.workdir / "jaeger.log").open("wb")
        self._proc = subprocess.Popen(
            [str(binary), "--config", f"file:{config}"],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"jaeger exited {self._proc.returncode}:\n{self.log_tail()}")
            try:
                self._get("/api/services")
                return self
            except (OSError, urllib.error.URLError):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"jaeger did not answer within {timeout}s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        if self.workdir is None:
            return ""
        try:
            return (self.workdir / "jaeger.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(10)
        self._proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Jaeger:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.query_url + path, timeout=5) as resp:
            return json.loads(resp.read())

    def services(self) -> list[str]:
        return [str(x) for x in self._get("/api/services").get("data") or []]

    def traces_of(self, service: str) -> list[dict[str, Any]]:
        """Every stored trace with a span of ``service`` (Jaeger's JSON)."""
        end = int(time.time() * 1e6)
        query = f"/api/traces?service={service}&start=0&end={end}&limit=100000"
        return list(self._get(query).get("data") or [])

    def trace(
        self,
        trace_id: str,
        min_spans: int = 1,
        timeout: float = 20.0,
        until: Callable[[list[dict[str, Any]]], bool] | None = None,
    ) -> list[dict[str, Any]]:
        """The spans of ``trace_id`` (Jaeger's JSON: operationName, references, tags,
        process), waiting until at least ``min_spans`` arrived and ``until(spans)`` holds
        (export is batched: each process sends its spans on its own schedule)."""
        deadline = time.monotonic() + timeout
        spans: list[dict[str, Any]] = []
        while True:
            try:
                data = self._get(f"/api/traces/{trace_id}")
                spans = []
                processes: dict[str, Any] = {}
                for t in data.get("data") or []:
                    processes.update(t.get("processes") or {})
                    spans.extend(t.get("spans") or [])
                for s in spans:
                    s["process"] = processes.get(str(s.get("processID")), {})
            except urllib.error.HTTPError as exc:
                if exc.code != 404:
                    raise
            done = len(spans) >= min_spans and (until is None or until(spans))
            if done or time.monotonic() >= deadline:
                return spans
            time.sleep(0.25)


def wait_serving(query: str, timeout: float = 30) -> bool:
    """Whether Jaeger's query API at ``query`` answers within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(query + "/api/services", timeout=2):
                return True
        except (OSError, urllib.error.URLError):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)


QUERY_PORTS = ("otlp_http", "otlp_grpc", "query", "query_grpc", "health")
