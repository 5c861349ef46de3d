"""The cold-start benchmark's clock: a process's start time read from ``/proc`` agrees with
the wall clock, so series C of ``make bench-runs`` measures the runner, not a clock offset.

It once added ``btime`` (whole seconds, truncated) to the start ticks and so read every start
up to a second early; on the project machine that was 0.6 s of every reported cold start.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_runs_cold import process_start_time


def test_a_process_start_time_is_the_wall_clock_time_it_was_spawned() -> None:
    errors = []
    for _ in range(5):
        before = time.time()
        proc = subprocess.Popen(["sleep", "0.2"])
        after = time.time()
        try:
            started = process_start_time(proc.pid)
        finally:
            proc.wait()
        # One clock tick (10 ms) of rounding down, plus scheduling slack on a busy machine.
        errors.append(max(before - started, started - after))
    assert max(errors) < 0.05, errors
