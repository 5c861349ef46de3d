"""How much writable memory each harness CLI maps: the ``data_mib`` of its harness table row.

The process node enforces a pod's memory limit as ``RLIMIT_DATA`` when it has no writable
cgroup, and that counts every private writable mapping, reserved or touched. For each kind
this runs the pinned CLI as its conformance test does (exactly the argv, environment and
files its harness module builds; the scripted model server asks for the MCP echo tool, then
the answer) under a data rlimit, and bisects the smallest limit (to ``--step`` MiB) at
which the whole round trip still completes: exit 0, the tool's result in the final answer.
It prints that limit per kind, and the run at each limit tried. Usage::

    .venv/bin/python bench/bench_harness_data.py [--kinds codex gemini-cli] [--step 16]
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for sub in ("operator", "hack", "runtime_image", ""):
    sys.path.insert(0, str(REPO / sub))

from tests.support.mcp_servers import HttpMcpServer  # noqa: E402
from tests.unit.harness.test_data_limits import completes  # noqa: E402


def smallest(kind: str, low: int, high: int, step: int, mcp: HttpMcpServer) -> int:
    """Bisect the smallest completing limit in (low, high] MiB (``high`` must complete)."""
    ok, seconds, why = completes(kind, high, mcp)
    print(f"{kind}: {high} MiB -> {'ok' if ok else 'FAILED'} ({seconds:.1f} s) {why}")
    if not ok:
        raise SystemExit(f"{kind} does not complete under {high} MiB: raise --high")
    while high - low > step:
        mid = (low + high) // 2
        ok, seconds, why = completes(kind, mid, mcp)
        print(f"{kind}: {mid} MiB -> {'ok' if ok else 'FAILED'} ({seconds:.1f} s) {why}")
        low, high = (low, mid) if ok else (mid, high)
    return high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["codex", "gemini-cli"])
    parser.add_argument("--low", type=int, default=32)
    parser.add_argument("--high", type=int, default=4096)
    parser.add_argument("--step", type=int, default=16)
    args = parser.parse_args()
    found: dict[str, int] = {}
    with HttpMcpServer("conformance", token=secrets.token_hex(24)) as mcp:
        for kind in args.kinds:
            found[kind] = smallest(kind, args.low, args.high, args.step, mcp)
    for kind, mib in found.items():
        print(f"{kind}: completes under RLIMIT_DATA={mib} MiB (step {args.step} MiB)")


if __name__ == "__main__":
    main()
