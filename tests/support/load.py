"""CPU load, as a busy machine's neighbours make it, for a measurement that depends on it.

Some figures move with the machine's load (Codex maps a 16 MiB stack for each of its
threads alive at once, and a loaded machine keeps more of them alive): a test of such a
figure holds it under load, and its benchmark measures it under load, with this.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def spinning(count: int) -> Iterator[set[int]]:
    """``count`` processes spinning on the CPUs while the body runs (their pids)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield {proc.pid for proc in spinners}
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()
