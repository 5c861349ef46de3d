"""The coding harness CLIs (Claude Code, …) harness nodes run, installed once into the cache.

``hack/harness-clis/package.json`` pins each CLI at the version of
``swarmkit_api.harness.HARNESSES`` and the committed ``package-lock.json`` pins every file's
integrity; ``npm ci`` installs them into
``~/.cache/swarmkit-operator/harness-clis/<lock hash>/`` (keyed by the lockfile, so an edit
installs beside the old one and two checkouts never disturb each other; cached: a ``stat``).

Install scripts stay off (``--ignore-scripts``): a CLI that ships its native binary as a
platform package (Claude Code 2.x: ``@anthropic-ai/claude-code-linux-x64``) gets that
binary linked as its ``node_modules/.bin`` entry by ``hack/harness-clis/link-native.mjs``
(the runtime image runs the same script) instead of by its postinstall script, so nothing
the registry serves runs at install time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from swarmkit_devcluster.build import BuildError
from swarmkit_devcluster.clients import _digest, find_npm
from swarmkit_devcluster.locks import exclusive
from swarmkit_devcluster.paths import cache_root, hack_dir

HARNESS_CLIS_DIR = "harness-clis"
LOCK_INPUTS = ("package.json", "package-lock.json", "link-native.mjs")
LINK_SCRIPT = "link-native.mjs"
_INSTALLED = ".installed"
_LOCK = ".harness-clis.lock"


def install_dir() -> Path:
    """Where the pinned CLIs are (or will be) installed: ``<dir>/node_modules``."""
    return cache_root() / HARNESS_CLIS_DIR / _digest(hack_dir() / HARNESS_CLIS_DIR, LOCK_INPUTS)


def pinned() -> dict[str, str]:
    """npm package → the exact version ``hack/harness-clis/package.json`` pins."""
    manifest = json.loads((hack_dir() / HARNESS_CLIS_DIR / "package.json").read_text())
    return dict(manifest["dependencies"])


def link_native_bins(root: Path, log: TextIO) -> None:
    """Point each CLI's ``.bin`` entry at its platform binary (``link-native.mjs``, the one
    script the runtime image runs too)."""
    res = subprocess.run(
        ["node", str(hack_dir() / HARNESS_CLIS_DIR / LINK_SCRIPT)],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        raise BuildError(f"{LINK_SCRIPT} failed in {root}:\n{res.stderr.strip()[-2000:]}")
    print(res.stdout.strip(), file=log, flush=True)


def ensure_harness_clis(log: TextIO | None = None) -> Path:
    """``npm ci`` the pinned harness CLIs unless cached; returns the install directory."""
    out = log if log is not None else sys.stderr
    target = install_dir()
    if (target / _INSTALLED).is_file():
        return target
    source = hack_dir() / HARNESS_CLIS_DIR
    with exclusive(cache_root() / _LOCK):
        if (target / _INSTALLED).is_file():
            return target
        npm = find_npm()
        target.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
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
        link_native_bins(target, out)
        (target / _INSTALLED).write_text(f"{time.time()}\n")
        print(
            f"  {HARNESS_CLIS_DIR:<24} installed in {time.monotonic() - start:6.1f}s  {target}",
            file=out,
            flush=True,
        )
    return target


__all__ = ["ensure_harness_clis", "install_dir", "link_native_bins", "pinned"]
