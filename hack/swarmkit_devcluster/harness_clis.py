"""The coding harness CLIs (Claude Code, …) harness nodes run, installed once into the cache.

``hack/harness-clis/package.json`` pins each CLI at the version of
``swarmkit_api.harness.HARNESSES`` and the committed ``package-lock.json`` pins every file's
integrity; ``npm ci`` installs them into
``~/.cache/swarmkit-operator/harness-clis/<lock hash>/`` (keyed by the lockfile, so an edit
installs beside the old one and two checkouts never disturb each other; cached: a ``stat``).

Install scripts stay off (``--ignore-scripts``): a CLI that ships its native binary as a
platform package (Claude Code 2.x: ``@anthropic-ai/claude-code-linux-x64``) gets that
binary linked as its ``node_modules/.bin`` entry here instead of by its postinstall script,
so nothing the registry serves runs at install time.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from swarmkit_devcluster.build import BuildError, _lock
from swarmkit_devcluster.clients import _digest, find_npm
from swarmkit_devcluster.paths import cache_root, hack_dir

HARNESS_CLIS_DIR = "harness-clis"
LOCK_INPUTS = ("package.json", "package-lock.json")
_INSTALLED = ".installed"
_LOCK = ".harness-clis.lock"


def install_dir() -> Path:
    """Where the pinned CLIs are (or will be) installed: ``<dir>/node_modules``."""
    return cache_root() / HARNESS_CLIS_DIR / _digest(hack_dir() / HARNESS_CLIS_DIR, LOCK_INPUTS)


def pinned() -> dict[str, str]:
    """npm package → the exact version ``hack/harness-clis/package.json`` pins."""
    manifest = json.loads((hack_dir() / HARNESS_CLIS_DIR / "package.json").read_text())
    return dict(manifest["dependencies"])


def _platform_package(package: str) -> str:
    """The platform package a CLI ships its native binary in (``<package>-linux-x64``)."""
    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), "")
    return f"{package}-{sys.platform}-{arch}"


def link_native_bins(root: Path) -> None:
    """Point each CLI's ``.bin`` entry at its platform binary (what its postinstall does)."""
    for package in pinned():
        native = root / "node_modules" / _platform_package(package)
        manifest = root / "node_modules" / package / "package.json"
        if not native.is_dir() or not manifest.is_file():
            continue
        for name in json.loads(manifest.read_text()).get("bin", {}):
            binary = next((p for p in (native / name, native / f"{name}.exe") if p.is_file()), None)
            if binary is None:
                continue
            binary.chmod(0o755)
            link = root / "node_modules" / ".bin" / name
            link.parent.mkdir(exist_ok=True)
            link.unlink(missing_ok=True)
            link.symlink_to(os.path.relpath(binary, link.parent))


def ensure_harness_clis(log: TextIO | None = None) -> Path:
    """``npm ci`` the pinned harness CLIs unless cached; returns the install directory."""
    out = log if log is not None else sys.stderr
    target = install_dir()
    if (target / _INSTALLED).is_file():
        return target
    source = hack_dir() / HARNESS_CLIS_DIR
    with _lock(cache_root() / _LOCK):
        if (target / _INSTALLED).is_file():
            return target
        npm = find_npm()
        target.mkdir(parents=True, exist_ok=True)
        for name in LOCK_INPUTS:
            (target / name).write_bytes((source / name).read_bytes())
        print(f"  npm ci for hack/{HARNESS_CLIS_DIR} ...", file=out, flush=True)
        start = time.monotonic()
        res = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
            cwd=target,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if res.returncode != 0:
            raise BuildError(
                f"`npm ci` failed in {target}:\n{(res.stderr or res.stdout).strip()[-3000:]}\n"
                "  Check that the npm registry is reachable (npm config get registry) and "
                "re-run `make harness-clis`."
            )
        link_native_bins(target)
        (target / _INSTALLED).write_text(f"{time.time()}\n")
        print(
            f"  {HARNESS_CLIS_DIR:<24} installed in {time.monotonic() - start:6.1f}s  {target}",
            file=out,
            flush=True,
        )
    return target


__all__ = ["ensure_harness_clis", "install_dir", "link_native_bins", "pinned"]
