"""Upstream files read from where their projects publish them, never copied into this repo.

A schema a test validates against (Argo Rollouts' ClusterAnalysisTemplate CRD) comes from the
project's own release, fetched through the Go module proxy (a registry this machine reaches),
pinned by version and by the module's checksum (``h1:``, the go.sum hash): a release that
changed under the same version is refused, and a newer one is a one-line change here.
The module cache (``go env GOMODCACHE``) keeps it after the first download.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GoModule:
    path: str
    version: str
    #: go.sum's ``h1:`` hash of the module zip (checked here: GOSUMDB is not reachable).
    sum: str


#: Argo Rollouts v1.8.3 (tag commit 49fa1516cf71672b69e265267da4e1d16e1fe114), Apache-2.0.
ARGO_ROLLOUTS = GoModule(
    "github.com/argoproj/argo-rollouts",
    "v1.8.3",
    "h1:blbtQva4IK9r6gFh+dWkCrLnFdPOWiv9ubQYu36qeaA=",
)


def module_dir(module: GoModule) -> Path:
    """The module's files, downloaded once through the module proxy and checked."""
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("Go is needed to fetch upstream schemas (the README's requirements)")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOSUMDB": "off", "GOTOOLCHAIN": "local"}
    with tempfile.TemporaryDirectory() as scratch:  # outside any module: a bare download
        res = subprocess.run(
            [go, "mod", "download", "-json", f"{module.path}@{module.version}"],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    info = json.loads(res.stdout or "{}")
    if res.returncode != 0 or info.get("Error"):
        raise RuntimeError(f"go mod download {module.path}@{module.version}: {info or res.stderr}")
    if info.get("Sum") != module.sum:
        raise RuntimeError(
            f"{module.path}@{module.version} has checksum {info.get('Sum')}, pinned {module.sum}"
        )
    return Path(info["Dir"])
