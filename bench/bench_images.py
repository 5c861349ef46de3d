"""Benchmark: building the two images (`make images`: buildah, no daemon) cold and warm.

`python -m swarmkit_devcluster images` builds the runtime and operator images into the
process node's image store. Measured as a fresh machine runs it, in a scratch store
(`SWARMKIT_CACHE_DIR` pointed at an empty directory, so the shared store other checkouts'
tests use is never rebuilt under them):

1. cold: the Debian tree (debootstrap), the bases (distroless closure, npm tarballs, the
   three base imports), then each image built and its root filesystem exported;
2. warm: the same command again, inputs unchanged (a hash of the inputs per image: a no-op;
   an image it builds again anyway, because a source changed in between, is listed).

The whole command's wall-clock time, and the builder's own record of each image (its build
seconds, the bases' seconds, buildah's version, the root filesystem's size). The scratch
store is deleted afterwards. Needs root, like `make images`. `make bench-images`; `--json`
prints the results as one JSON document, last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _build(env: dict[str, str]) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "swarmkit_devcluster", "images"],
        env=env,
        cwd=HERE.parent,
        stdout=sys.stderr,  # progress stays visible; stdout carries only the JSON
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"`swarmkit_devcluster images` exited {done.returncode}")
    return round(time.monotonic() - started, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON, last")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="swarmkit-bench-images-"))
    env = {**os.environ, "SWARMKIT_CACHE_DIR": str(scratch)}
    try:
        load_before = [round(x, 2) for x in os.getloadavg()]
        builds = scratch / "images" / "builds.json"
        cold = _build(env)
        after_cold = json.loads(builds.read_text())
        warm = _build(env)
        records = json.loads(builds.read_text())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    images = {
        name: {
            "reference": rec["reference"],
            "buildSeconds": rec["buildSeconds"],
            "rootfsMiB": round(rec["rootfsBytes"] / 2**20),
        }
        for name, rec in sorted(records.items())
    }
    base_seconds = {rec["baseSeconds"] for rec in records.values()}
    results = {
        "coldSeconds": cold,
        "warmSeconds": warm,
        # images the warm run built again: their inputs changed between the two runs (a
        # source edited meanwhile); empty when the warm run was the no-op it should be
        "warmRebuilt": sorted(name for name, rec in records.items() if rec != after_cold.get(name)),
        # the bases are made once per build command, before the first image
        "basesSeconds": max(base_seconds),
        "images": images,
        "builder": sorted({rec["builder"] for rec in records.values()}),
        "loadavg_before": load_before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
