"""Third-party A2A and MCP clients the integration suite drives, installed once into the cache.

* The A2A Go SDK (``github.com/a2aproject/a2a-go``) client: the wrapper module
  ``hack/a2a-go-client`` (``go.mod``/``go.sum`` committed, its ``main.go`` a small program
  that prints what happened as JSON) is built from the Go module proxy with ``GOSUMDB=off``
  (the committed ``go.sum`` pins every module) into
  ``~/.cache/swarmkit-operator/a2a-go-client/<sdk version>-<inputs hash>/a2a-go-client``.
* The npm packages of ``hack/node-clients/package.json`` (the A2A JavaScript SDK in both
  protocol lines, the TypeScript MCP SDK, express): ``npm ci`` from the committed
  ``package-lock.json`` into ``~/.cache/swarmkit-operator/node-clients/<lock hash>/``; the
  scripts of ``hack/node-clients`` are copied beside that ``node_modules`` (Node resolves
  an ES module's imports from the script's own directory upwards), into
  ``run-<scripts hash>/``.

Both are keyed by the hash of their inputs, so an edit rebuilds and two checkouts at
different commits do not disturb each other; a cached build is a no-op (a few ``stat``s).
Builds take their own lock in the cache (another process may be building them right now:
it waits), not the cluster binaries' one, so a test never waits behind a Kubernetes build.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

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

GO_CLIENT_DIR = "a2a-go-client"
GO_CLIENT_INPUTS = ("go.mod", "go.sum", "main.go")
NODE_CLIENTS_DIR = "node-clients"
NODE_LOCK_INPUTS = ("package.json", "package-lock.json")
_INSTALLED = ".installed"
_LOCK = ".clients.lock"


@dataclass(frozen=True)
class ThirdPartyClients:
    """Where the built clients are."""

    go_client: Path  # the a2a-go client binary
    node_dir: Path  # the directory holding the node scripts (node_modules is its parent's)

    def node_script(self, name: str) -> Path:
        return self.node_dir / name


def _digest(directory: Path, names: list[str] | tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for name in names:
        h.update(name.encode() + b"\0")
        h.update((directory / name).read_bytes())
    return h.hexdigest()[:12]


def go_sdk_version(module_dir: Path | None = None) -> str:
    """The a2a-go version the wrapper module requires (from its ``go.mod``)."""
    gomod = ((module_dir or hack_dir() / GO_CLIENT_DIR) / "go.mod").read_text()
    found = re.search(r"github\.com/a2aproject/a2a-go\s+(v\S+)", gomod)
    if found is None:
        raise BuildError(
            f"hack/{GO_CLIENT_DIR}/go.mod does not require github.com/a2aproject/a2a-go"
        )
    return found.group(1)


def go_client_path() -> Path:
    module_dir = hack_dir() / GO_CLIENT_DIR
    key = f"{go_sdk_version(module_dir)}-{_digest(module_dir, GO_CLIENT_INPUTS)}"
    return cache_root() / GO_CLIENT_DIR / key / GO_CLIENT_DIR


def node_install_dir() -> Path:
    source = hack_dir() / NODE_CLIENTS_DIR
    return cache_root() / NODE_CLIENTS_DIR / _digest(source, NODE_LOCK_INPUTS)


def _scripts(source: Path) -> list[str]:
    return sorted(p.name for p in source.glob("*.mjs"))


def node_scripts_dir() -> Path:
    source = hack_dir() / NODE_CLIENTS_DIR
    return node_install_dir() / f"run-{_digest(source, _scripts(source))}"


def build_go_client(log: TextIO) -> Path:
    """Build the a2a-go client unless it is cached; returns the binary's path."""
    target = go_client_path()
    if target.is_file():
        return target
    module_dir = hack_dir() / GO_CLIENT_DIR
    with exclusive(cache_root() / _LOCK):
        if target.is_file():
            return target
        go = find_go()
        env = _go_env(go)
        # The committed go.sum pins every module; the checksum database is not needed.
        env.setdefault("GOSUMDB", "off")
        print(f"  downloading Go modules for hack/{GO_CLIENT_DIR} ...", file=log, flush=True)
        _download(go, module_dir, env)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        start = time.monotonic()
        res = subprocess.run(
            [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(tmp), "."],
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
            raise BuildError(f"building the a2a-go client failed:\n{err[-4000:]}")
        os.replace(tmp, target)
        print(
            f"  {GO_CLIENT_DIR:<24} built in {time.monotonic() - start:6.1f}s  "
            f"(a2a-go {go_sdk_version(module_dir)})  {target}",
            file=log,
            flush=True,
        )
    return target


def find_npm() -> str:
    npm = os.environ.get("NPM") or shutil.which("npm")
    if not npm or shutil.which("node") is None:
        raise BuildError(
            "node and npm were not found (needed for the third-party A2A/MCP SDK tests).\n"
            "  Install Node.js 20 or newer with npm (Debian: apt-get install nodejs npm) and "
            "re-run `make clients`."
        )
    return npm


def install_node_clients(log: TextIO) -> Path:
    """``npm ci`` the node clients unless cached; returns the scripts' directory."""
    source = hack_dir() / NODE_CLIENTS_DIR
    install = node_install_dir()
    if (install / _INSTALLED).is_file() and node_scripts_dir().is_dir():
        return node_scripts_dir()
    with exclusive(cache_root() / _LOCK):
        if not (install / _INSTALLED).is_file():
            npm = find_npm()
            install.mkdir(parents=True, exist_ok=True)
            for name in NODE_LOCK_INPUTS:
                shutil.copyfile(source / name, install / name)
            print(f"  npm ci for hack/{NODE_CLIENTS_DIR} ...", file=log, flush=True)
            start = time.monotonic()
            res = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
                cwd=install,
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            if res.returncode != 0:
                raise BuildError(
                    f"`npm ci` failed in {install}:\n{(res.stderr or res.stdout).strip()[-3000:]}\n"
                    "  Check that the npm registry is reachable (npm config get registry) and "
                    "re-run `make clients`."
                )
            (install / _INSTALLED).write_text(f"{time.time()}\n")
            print(
                f"  {NODE_CLIENTS_DIR:<24} installed in {time.monotonic() - start:6.1f}s  "
                f"{install}",
                file=log,
                flush=True,
            )
        scripts = node_scripts_dir()
        if not scripts.is_dir():
            tmp = scripts.with_name(scripts.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            for name in _scripts(source):
                shutil.copyfile(source / name, tmp / name)
            os.replace(tmp, scripts)
    return scripts


def ensure_clients(log: TextIO | None = None) -> ThirdPartyClients:
    """Build / install both (each a no-op when cached)."""
    out = log if log is not None else sys.stderr
    return ThirdPartyClients(go_client=build_go_client(out), node_dir=install_node_clients(out))


__all__ = [
    "ThirdPartyClients",
    "build_go_client",
    "ensure_clients",
    "go_client_path",
    "go_sdk_version",
    "install_node_clients",
    "node_scripts_dir",
]
