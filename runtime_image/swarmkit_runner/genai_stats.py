"""This process's model calls, counted into the GenAI client metric buckets for its report.

Every model call (:func:`.traced.chat`, the ``llm_prompt`` skills' calls) is recorded here,
whether tracing is on or not: the counts travel in the run's result
(:class:`~swarmkit_api.genai_metrics.GenAiCallStats`) and the operator serves them as
``gen_ai_client_operation_duration_seconds`` and ``gen_ai_client_token_usage`` beside its
own metrics. Names pass the secret scrubber when the report is made.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from swarmkit_api.genai_metrics import (
    DURATION_BUCKETS,
    MAX_ENTRIES,
    TOKEN_BUCKETS,
    Buckets,
    GenAiCallStats,
    bucket_index,
    empty,
)

Key = tuple[str, str, str, str]  # operation, provider, model, error type ("" = none)


@dataclass
class _Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = empty(self.bounds)

    def observe(self, value: float) -> None:
        self.counts[bucket_index(self.bounds, value)] += 1
        self.total += value

    def report(self) -> Buckets:
        return Buckets.of(self.counts, self.total)


@dataclass
class _Entry:
    duration: _Histogram = field(default_factory=lambda: _Histogram(DURATION_BUCKETS))
    input_tokens: _Histogram = field(default_factory=lambda: _Histogram(TOKEN_BUCKETS))
    output_tokens: _Histogram = field(default_factory=lambda: _Histogram(TOKEN_BUCKETS))


class GenAiStats:
    """Model calls by (operation, provider, model, error type), at most MAX_ENTRIES keys."""

    def __init__(self) -> None:
        self._entries: dict[Key, _Entry] = {}
        self._lock = threading.Lock()

    def record(
        self,
        operation: str,
        provider: str,
        model: str,
        seconds: float,
        input_tokens: int = 0,
        output_tokens: int = 0,
        error_type: str | None = None,
    ) -> None:
        key = (operation, provider, model, error_type or "")
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                if len(self._entries) >= MAX_ENTRIES:
                    return  # the report's size bound (see MAX_ENTRIES)
                entry = self._entries[key] = _Entry()
            entry.duration.observe(max(seconds, 0.0))
            if error_type is None:  # the conventions: tokens of successful calls only
                entry.input_tokens.observe(input_tokens)
                entry.output_tokens.observe(output_tokens)

    def report(self, scrub: Callable[[str], str] = str) -> list[GenAiCallStats]:
        with self._lock:
            items = sorted(self._entries.items())
        out = []
        for (operation, provider, model, error), entry in items:
            ok = not error
            out.append(
                GenAiCallStats(
                    operation=operation,
                    provider=scrub(provider),
                    model=scrub(model),
                    error_type=scrub(error) if error else None,
                    duration=entry.duration.report(),
                    input_tokens=entry.input_tokens.report() if ok else None,
                    output_tokens=entry.output_tokens.report() if ok else None,
                )
            )
        return out


#: The calls of the run being executed: :func:`begin` gives each run (a Job's stage, or one
#: served A2A task) its own, and the tasks it starts inherit it (a context variable, so
#: concurrent served tasks do not mix); calls outside a run (the MCP gateway) go to a
#: process-wide one nobody reports.
_CURRENT: ContextVar[GenAiStats | None] = ContextVar("genai_stats", default=None)
_OUTSIDE = GenAiStats()


def begin() -> GenAiStats:
    """A fresh count for the run starting in the current context."""
    stats = GenAiStats()
    _CURRENT.set(stats)
    return stats


def current() -> GenAiStats:
    return _CURRENT.get() or _OUTSIDE
