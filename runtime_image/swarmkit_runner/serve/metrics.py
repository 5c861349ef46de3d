"""The served pod's metrics in the Prometheus text format (no client library needed).

``GET /metrics``:

* ``swarmkit_serve_tasks_total{outcome}``: finished tasks by final state (``completed``,
  ``failed``, ``canceled``);
* ``swarmkit_serve_task_duration_seconds``: histogram of task latency (start → end);
* ``swarmkit_serve_active_tasks``: unfinished tasks (working or waiting for an answer);
* ``swarmkit_serve_rejected_total{reason}``: calls refused before anything ran
  (``unauthorized``, ``busy``, ``draining``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)


@dataclass
class ServeMetrics:
    """Counters of one replica (single event loop: no locking needed)."""

    outcomes: Counter[str] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    duration_sum: float = 0.0
    duration_count: int = 0
    active: int = 0

    def started(self) -> None:
        self.active += 1

    def finished(self, outcome: str, seconds: float) -> None:
        self.active = max(0, self.active - 1)
        self.outcomes[outcome] += 1
        self.duration_sum += seconds
        self.duration_count += 1
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                self.buckets[i] += 1

    def reject(self, reason: str) -> None:
        self.rejected[reason] += 1

    def render(self) -> str:
        lines = [
            "# HELP swarmkit_serve_tasks_total Finished served tasks by final state.",
            "# TYPE swarmkit_serve_tasks_total counter",
        ]
        for outcome in sorted(set(self.outcomes) | {"completed", "failed", "canceled"}):
            lines.append(
                f'swarmkit_serve_tasks_total{{outcome="{outcome}"}} {self.outcomes[outcome]}'
            )
        lines += [
            "# HELP swarmkit_serve_task_duration_seconds Served task latency.",
            "# TYPE swarmkit_serve_task_duration_seconds histogram",
        ]
        for bound, count in zip(BUCKETS, self.buckets, strict=True):
            lines.append(f'swarmkit_serve_task_duration_seconds_bucket{{le="{bound:g}"}} {count}')
        lines += [
            f'swarmkit_serve_task_duration_seconds_bucket{{le="+Inf"}} {self.duration_count}',
            f"swarmkit_serve_task_duration_seconds_sum {self.duration_sum:.6f}",
            f"swarmkit_serve_task_duration_seconds_count {self.duration_count}",
            "# HELP swarmkit_serve_active_tasks Unfinished served tasks.",
            "# TYPE swarmkit_serve_active_tasks gauge",
            f"swarmkit_serve_active_tasks {self.active}",
            "# HELP swarmkit_serve_rejected_total Calls refused before anything ran.",
            "# TYPE swarmkit_serve_rejected_total counter",
        ]
        for reason in sorted(set(self.rejected) | {"unauthorized", "busy", "draining"}):
            lines.append(
                f'swarmkit_serve_rejected_total{{reason="{reason}"}} {self.rejected[reason]}'
            )
        return "\n".join(lines) + "\n"


__all__ = ["BUCKETS", "ServeMetrics"]
