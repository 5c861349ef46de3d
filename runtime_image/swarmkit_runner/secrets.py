"""Secret values: read only from the env vars the Job sets, and scrubbed from all output.

The Job sets ``secret_env_name(ref)`` for every Secret reference in the bundle. Values are
read lazily, remembered by the :class:`SecretStore` and replaced by ``[REDACTED]`` in every
audit line, error message and the run result (defence in depth: code paths should never
print them in the first place).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from swarmkit_api.bundle import secret_env_name
from swarmkit_api.common import SecretKeyRef

SECRET_ENV_PREFIX = "SWARMKIT_SECRET_"
REDACTED = "[REDACTED]"
#: Shorter values are not scrubbed (they would mangle ordinary text); such a secret is weak.
MIN_SCRUB_LENGTH = 4


class MissingSecret(Exception):
    """The env var for a Secret reference is not set."""

    def __init__(self, ref: SecretKeyRef) -> None:
        super().__init__(
            f"secret {ref.name}/{ref.key} is not available (env {secret_env_name(ref)} unset)"
        )
        self.ref = ref


class SecretStore:
    """Reads secret values from the environment and knows every value it handed out."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ if environ is not None else os.environ
        self._values: set[str] = set()

    def get(self, ref: SecretKeyRef) -> str:
        """The value of ``ref``; raises :class:`MissingSecret` when its env var is unset."""
        value = self._environ.get(secret_env_name(ref))
        if value is None:
            raise MissingSecret(ref)
        if len(value) >= MIN_SCRUB_LENGTH:
            self._values.add(value)
        return value

    def remember(self, value: str) -> None:
        """Scrub ``value`` from output as well (e.g. a header composed from a secret)."""
        if len(value) >= MIN_SCRUB_LENGTH:
            self._values.add(value)

    def scrub(self, text: str) -> str:
        """``text`` with every known secret value replaced by ``[REDACTED]``."""
        if not self._values or not text:
            return text
        for value in sorted(self._values, key=len, reverse=True):
            if value in text:
                text = text.replace(value, REDACTED)
        return text


def hide_secret_environ(prefix: str = SECRET_ENV_PREFIX) -> int:
    """Overwrite the secret values in this process's original environment block with ``*``.

    ``/proc/<pid>/environ`` shows that block (the strings ``execve`` put on the stack), not
    ``os.environ``; any process of the same user (a skill script, an MCP server) could read
    the runner's secrets there through its parent pid. Python copied the environment into
    ``os.environ`` at start-up, so the runner keeps the values; the block only keeps their
    lengths. Every subprocess gets an explicit environment, so none inherits the masked
    block. Linux only; returns how many values were masked (0 when nothing matched or the
    block could not be located safely).
    """
    if not sys.platform.startswith("linux"):
        return 0
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (stat fields 50, 51)
        expected = Path("/proc/self/environ").read_bytes()
    except (OSError, IndexError, ValueError):
        return 0
    if end <= start or end - start != len(expected):
        return 0
    if ctypes.string_at(start, end - start) != expected:
        return 0  # not the block we think it is: touch nothing
    masked = 0
    offset = 0
    needle = prefix.encode()
    for entry in expected.split(b"\0"):
        if entry.startswith(needle) and b"=" in entry:
            value_at = offset + entry.index(b"=") + 1
            length = len(entry) - entry.index(b"=") - 1
            if length:
                ctypes.memset(start + value_at, ord("*"), length)
                masked += 1
        offset += len(entry) + 1
    return masked
