"""The one inter-process lock of the dev tooling: an exclusive ``flock`` on a file.

Builds, client installs, the image store, a cluster's state directory and the chart's operator
identity are shared by every checkout and shell on the machine; each takes this lock on its own
file so two ``make`` runs wait for each other instead of writing the same cache at once.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created with its parents) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
