"""The GenAI client metrics of a runner's model calls, as its report carries them.

The OpenTelemetry GenAI metrics conventions define two histograms per model call:
``gen_ai.client.operation.duration`` (seconds) and ``gen_ai.client.token.usage`` (tokens,
split by ``gen_ai.token.type``), with advisory bucket boundaries. The runner counts its calls
into those buckets (:class:`GenAiCallStats`, one entry per operation, provider, model and
error type) and reports them in its :class:`~swarmkit_api.bundle.RunResult`; the operator
adds them to the same histograms on its Prometheus endpoint. Bucket counts rather than one
entry per call keep the report a fixed size however many calls a run makes (the
termination message holds 4 KiB), and they add up exactly into a Prometheus histogram that
has the same boundaries.

Only names and numbers are carried: no prompt, output or argument.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from pydantic import Field

from .base import ApiModel

#: ``gen_ai.client.token.usage``: the conventions' advisory boundaries, 1, 4, … 4^13.
TOKEN_BUCKETS: tuple[float, ...] = tuple(float(4**i) for i in range(14))
#: ``gen_ai.client.operation.duration``: the conventions' advisory boundaries, 0.01 s · 2^i.
DURATION_BUCKETS: tuple[float, ...] = tuple(round(0.01 * 2**i, 2) for i in range(14))
#: Entries a report keeps (per operation, provider, model and error type): a bound on its size.
#: A run with more combinations reports the first ones (none of ours comes close).
MAX_ENTRIES = 8


class Buckets(ApiModel):
    """One histogram: the non-empty buckets (not cumulative) and the sum of the values."""

    counts: list[tuple[int, int]] = Field(
        description="[bucket, observations] per non-empty bucket: bucket i counts the values "
        "<= boundary i (above the last boundary: i = number of boundaries, +Inf).",
    )
    sum: float = Field(default=0.0, ge=0, description="Sum of the observed values.")

    @classmethod
    def of(cls, dense: Sequence[int], total: float) -> Buckets:
        return cls(counts=[(i, n) for i, n in enumerate(dense) if n], sum=round(total, 6))

    def dense(self, bounds: Sequence[float]) -> list[int] | None:
        """Counts per bucket for ``bounds`` (None: an index outside them, another layout)."""
        out = empty(bounds)
        for i, n in self.counts:
            if not 0 <= i < len(out) or n < 0:
                return None
            out[i] += n
        return out

    @property
    def count(self) -> int:
        return sum(n for _, n in self.counts)


class GenAiCallStats(ApiModel):
    """The model calls of one operation, provider, model and outcome in a run's stage."""

    operation: str = Field(description="gen_ai.operation.name (chat).")
    provider: str = Field(description="gen_ai.provider.name (openai, swarmkit.replay, …).")
    model: str = Field(description="gen_ai.request.model.")
    error_type: str | None = Field(
        default=None, description="error.type of calls that failed; unset for successful ones."
    )
    duration: Buckets = Field(description="Call durations in seconds (DURATION_BUCKETS).")
    input_tokens: Buckets | None = Field(
        default=None, description="Input tokens per successful call (TOKEN_BUCKETS)."
    )
    output_tokens: Buckets | None = Field(
        default=None, description="Output tokens per successful call (TOKEN_BUCKETS)."
    )

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.operation, self.provider, self.model, self.error_type or "")


def bucket_index(bounds: Sequence[float], value: float) -> int:
    """The bucket ``value`` falls in: the first boundary ``>= value`` (Prometheus ``le``)."""
    return bisect.bisect_left(bounds, value)


def empty(bounds: Sequence[float]) -> list[int]:
    return [0] * (len(bounds) + 1)
