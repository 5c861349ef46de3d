"""Benchmark: installing the third-party SDK clients the suite drives (`make clients`).

`python -m swarmkit_devcluster clients` builds the A2A Go SDK's client from the Go module
proxy and `npm ci`s the A2A JavaScript SDKs and the TypeScript MCP SDK, once, into the cache.
Measured twice, each as the command a fresh machine runs:

1. cold: `SWARMKIT_CACHE_DIR`, `GOCACHE`, `GOMODCACHE` and `npm_config_cache` pointed at
   empty directories (every module and tarball downloaded, the Go client compiled);
2. warm: the same command again over what it just installed (a few `stat`s: a no-op).

The whole command's wall-clock time, and the Go build's and `npm ci`'s own times as the
command prints them. The scratch caches are deleted afterwards (the real cache is never
touched). `make bench-clients`; `--json` prints the results as one JSON document, last.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: the per-part lines `swarmkit_devcluster clients` prints ("<dir>  built in 36.1s ...")
PART = re.compile(r"^\s*(a2a-go-client|node-clients)\s+(?:built|installed) in\s+([\d.]+)s", re.M)


def _install(env: dict[str, str]) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "swarmkit_devcluster", "clients"],
        env=env,
        cwd=HERE.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = round(time.monotonic() - started, 1)
    if done.returncode != 0:
        raise SystemExit(f"`swarmkit_devcluster clients` failed:\n{done.stdout}{done.stderr}")
    parts = {name: float(s) for name, s in PART.findall(done.stdout + done.stderr)}
    return {"seconds": seconds, "parts": parts}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON, last")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="swarmkit-bench-clients-"))
    env = dict(os.environ)
    for var, sub in (
        ("SWARMKIT_CACHE_DIR", "cache"),
        ("GOCACHE", "gocache"),
        ("GOMODCACHE", "gomodcache"),
        ("npm_config_cache", "npm"),
    ):
        (scratch / sub).mkdir()
        env[var] = str(scratch / sub)
    try:
        load_before = [round(x, 2) for x in os.getloadavg()]
        cold = _install(env)
        print(f"cold: {cold}", flush=True)
        warm = _install(env)
        print(f"warm: {warm}", flush=True)
    finally:
        # Go's module cache is read-only on disk: make it writable to delete it.
        subprocess.run(["chmod", "-R", "u+w", str(scratch)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    results = {
        "cold": cold,
        "warm": warm,
        "loadavg_before": load_before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
