"""Secret values: read only from the env vars the Job sets, and scrubbed from all output.

The Job sets ``secret_env_name(ref)`` for every Secret reference in the bundle. Values are
read lazily, remembered by the :class:`SecretStore` and replaced by ``[REDACTED]`` in every
audit line, error message and the run result (defence in depth: code paths should never
print them in the first place).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from swarmkit_api.bundle import secret_env_name
from swarmkit_api.common import SecretKeyRef

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
