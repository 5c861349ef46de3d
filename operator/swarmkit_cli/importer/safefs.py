"""Reading a folder someone else wrote: no symlink is followed, no file read past a cap.

``import`` and ``pin`` read trees downloaded from anywhere. A symlink in such a tree can
point at ``~/.kube/config`` or ``/etc``; so every file is opened with ``O_NOFOLLOW`` and
must be a regular file, every directory between the tree's root and a referenced file must
be a real directory, and a file larger than :data:`MAX_SOURCE_BYTES` is refused before it is
read. A path named on the command line is taken as named (a link you type is yours); what
is found inside it never is. The one error, :class:`Refused`, carries a message that says
what was not read and why.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

#: The largest source file read (YAML, SKILL.md, a bundled file): a Skill renders into one
#: 1 MiB ConfigMap and a Workspace is one object, so anything larger cannot be imported.
MAX_SOURCE_BYTES = 4 * 1024 * 1024


class Refused(Exception):
    """A source file was not read: a symlink, not a regular file, or too large."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


#: The reason given for every symlink found inside a source folder.
SYMLINK = "a symlink: not followed; not imported"


def read_bytes(path: Path, limit: int = MAX_SOURCE_BYTES) -> bytes:
    """The content of regular file ``path``, never through a symlink (raises Refused)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(path, SYMLINK) from None
        raise Refused(path, f"cannot read it: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Refused(path, "not a regular file; not imported")
        if info.st_size > limit:
            raise Refused(path, f"{info.st_size} bytes, over the {limit}-byte limit; not read")
        data = f.read(limit + 1)
    if len(data) > limit:  # grew while we read it
        raise Refused(path, f"over the {limit}-byte limit; not read")
    return data


def read_text(path: Path, limit: int = MAX_SOURCE_BYTES) -> str:
    """:func:`read_bytes` decoded as UTF-8 (UnicodeDecodeError as usual)."""
    return read_bytes(path, limit).decode("utf-8")


def read_inside(base: Path, rel: str) -> tuple[Path, str]:
    """The file ``rel`` (relative, no ``..``) under ``base``, no component a symlink."""
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or ".." in parts or "\\" in rel:
        raise Refused(rel, "must be a relative path inside the source folder")
    here = base
    for part in parts[:-1]:
        here = here / part
        if here.is_symlink():
            raise Refused(here, SYMLINK)
    path = here / parts[-1]
    return path, read_text(path)
