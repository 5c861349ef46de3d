"""How much writable memory each harness CLI maps: the ``data_mib`` of its harness table row.

The process node enforces a pod's memory limit as ``RLIMIT_DATA`` when it has no writable
cgroup, and that counts every private writable mapping, reserved or touched (``VmData``).
For each kind this runs the pinned CLI ``--runs`` times as its conformance test does
(exactly the argv, environment and files its harness module builds; the scripted model
server asks for the MCP echo tool, then the answer) with no limit, samples the ``VmData`` of
every process the run starts each millisecond, and prints the distribution of each run's
peak (the largest of its processes: an rlimit binds each process on its own) beside the
row's ``data_mib``. What a CLI maps depends on the machine's load: Codex gives its threads
16 MiB stacks, and a loaded machine keeps more of its blocking-pool threads alive at
once; ``--busy N`` runs N processes spinning on the CPUs meanwhile, as a test suite's
neighbours do. Not for Claude Code: Bun sizes what it reserves to the limit it finds (5,443
MiB with none), so only a run under a limit tells what it needs. Usage::

    .venv/bin/python bench/bench_harness_data.py [--kinds codex gemini-cli] [--runs 30]
        [--busy 3]
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for sub in ("operator", "hack", "runtime_image", ""):
    sys.path.insert(0, str(REPO / sub))

from bench_support import fmt_spread, loadavg, pct, proc_status, spread  # noqa: E402
from tests.support.load import spinning  # noqa: E402
from tests.support.mcp_servers import HttpMcpServer  # noqa: E402
from tests.unit.harness.test_data_limits import completes  # noqa: E402

from swarmkit_api.harness import HARNESSES  # noqa: E402

PROC = Path("/proc")


def _stat(pid: str) -> tuple[int, int] | None:
    """A process's parent pid and its ``VmData`` in KiB (None once it has gone)."""
    try:
        fields = proc_status(pid)
    except OSError:
        return None
    return int(fields["PPid"]), int(fields.get("VmData", "0 kB").split()[0])


class PeakSampler:
    """Each millisecond, the ``VmData`` of every process descended from this one (but the
    spinners); :meth:`take` returns the largest seen since the last call, in MiB."""

    def __init__(self, ignore: set[int]) -> None:
        self._ignore = ignore
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.001):
            stats = {p.name: _stat(p.name) for p in PROC.iterdir() if p.name.isdigit()}
            for pid, stat in stats.items():
                if stat is None or int(pid) in self._ignore:
                    continue
                parent, seen = stat[0], {pid}
                while parent not in (0, 1, me) and str(parent) not in seen:
                    seen.add(str(parent))
                    up = stats.get(str(parent))
                    parent = up[0] if up else 0
                if parent == me:
                    self._peak = max(self._peak, stat[1])

    def take(self) -> int:
        peak, self._peak = self._peak, 0
        return peak // 1024

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def measure(kind: str, runs: int, sampler: PeakSampler, mcp: HttpMcpServer) -> list[int]:
    """Each completed run's peak ``VmData`` in MiB (a run that fails is reported, not kept)."""
    peaks = []
    sampler.take()
    for run in range(runs):
        ok, seconds, why = completes(kind, 1 << 20, mcp)
        peak = sampler.take()
        print(f"{kind} #{run + 1}: peak {peak} MiB ({seconds:.1f} s){'' if ok else ' ' + why}")
        if ok:
            peaks.append(peak)
    return peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["codex", "gemini-cli"])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--busy", type=int, default=0, help="CPU-spinning processes meanwhile")
    args = parser.parse_args()
    found: dict[str, list[int]] = {}
    with (
        spinning(args.busy) as spinners,
        HttpMcpServer("conformance", token=secrets.token_hex(24)) as mcp,
    ):
        sampler = PeakSampler(spinners)
        try:
            for kind in args.kinds:
                found[kind] = measure(kind, args.runs, sampler, mcp)
        finally:
            sampler.close()
    load = loadavg()[0]
    for kind, peaks in found.items():
        need = HARNESSES[kind].data_mib or 0
        over = sum(peak > need for peak in peaks)
        print(
            f"{kind}: {len(peaks)} runs, {args.busy} busy, load {load:.1f}: peak VmData "
            f"(min / median / max) {fmt_spread(spread(peaks), 'MiB')}, p90 "
            f"{pct(peaks, 0.9):.0f} MiB; data_mib {need}, {over} runs above it"
        )


if __name__ == "__main__":
    main()
