"""The operator under tracemalloc, for ``BENCH_HEAP=DIR bench/bench_scale.py``: where its
bytes per object go (issue 43).

Runs ``python -m swarmkit_operator`` with tracemalloc on (a few frames: enough to name
the caller of a container's allocation); on SIGUSR1 writes what is allocated now, by line
and by call stack, to ``$BENCH_HEAP_OUT`` (the benchmark signals at Ready, where it reads
the peak RSS). Its timings are not the benchmark's: tracemalloc slows every allocation.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

FRAMES = 4
TOP = 60


def dump(_signum: int, _frame: FrameType | None) -> None:
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    current, peak = tracemalloc.get_traced_memory()
    lines = [f"traced now {current / 2**20:.1f} MiB, traced peak {peak / 2**20:.1f} MiB", ""]
    lines += ["# by line", *(str(s) for s in snapshot.statistics("lineno")[:TOP]), ""]
    lines.append("# by call stack")
    for stat in snapshot.statistics("traceback")[:TOP]:
        lines.append(f"{stat.size / 2**20:.1f} MiB in {stat.count} blocks")
        lines += [f"    {line}" for line in stat.traceback.format()]
    Path(os.environ["BENCH_HEAP_OUT"]).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    tracemalloc.start(FRAMES)
    signal.signal(signal.SIGUSR1, dump)
    sys.argv = ["swarmkit_operator", *sys.argv[1:]]
    runpy.run_module("swarmkit_operator", run_name="__main__", alter_sys=True)
