"""Builds in use: a node that runs pods from a root filesystem holds a shared lock on it.

``make images`` keeps the newest :data:`~swarmkit_devcluster.imagebuild.build.KEEP` builds per
image; before that rule deleted an older one, a CI clone's test session lost its runtime root
filesystem to three ``make images`` of other checkouts during its run, and its Run pods fell
back to host commands (a harness node then found no CLI). So a process node takes a shared
``flock`` on ``<rootfs>.inuse`` for every root filesystem it hands to a pod, held until the node
exits; the prune skips a build whose lock it cannot take exclusively, and deletes the others
while holding that exclusive lock.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SUFFIX = ".inuse"


def lock_path(rootfs: Path) -> Path:
    return rootfs.with_name(rootfs.name + SUFFIX)


class Leases:
    """The shared locks one process holds, one per root filesystem (held until it exits)."""

    def __init__(self) -> None:
        self._fds: dict[Path, int] = {}

    def hold(self, rootfs: Path) -> bool:
        """Lease ``rootfs``; False when it is gone (pruned before the lease was taken)."""
        path = lock_path(rootfs)
        if path not in self._fds:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                return (rootfs / "usr").is_dir()  # a read-only store: nothing to lease
            fcntl.flock(fd, fcntl.LOCK_SH)  # waits while a prune deletes it
            self._fds[path] = fd
        return (rootfs / "usr").is_dir()


@contextmanager
def unused(rootfs: Path) -> Iterator[bool]:
    """Within the block, True when no process leases ``rootfs`` (and none can start to)."""
    path = lock_path(rootfs)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
