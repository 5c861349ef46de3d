"""Where a long step's time went: named laps, printed in one line (``make cluster-down``).

A teardown that takes a minute and a half says which part took it, so a regression (or a
kernel that is slow to free something) shows in the output people already read."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Laps:
    """Seconds per named part, in order; :meth:`lap` closes the part that just ended."""

    parts: list[tuple[str, float]] = field(default_factory=list)
    _mark: float = field(default_factory=time.monotonic)

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.parts.append((name, now - self._mark))
        self._mark = now

    def total(self) -> float:
        return sum(seconds for _, seconds in self.parts)

    def line(self, at_least: float = 0.05) -> str:
        """``name 1.2s, other 0.3s`` (parts under ``at_least`` seconds left out)."""
        return ", ".join(f"{n} {s:.1f}s" for n, s in self.parts if s >= at_least)
