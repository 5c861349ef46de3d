"""The GenAI client metrics of the Runs' model calls, on the operator's Prometheus endpoint.

The runner counts each model call into the OpenTelemetry GenAI conventions' histogram
buckets and reports them in its result (``swarmkit_api.genai_metrics``); this module
adds each Job's report to two Prometheus histograms, named as an OpenTelemetry-to-Prometheus
translation names the conventions' instruments (dots become underscores, a unit in braces
is dropped, ``s`` becomes ``_seconds``):

* ``gen_ai_client_operation_duration_seconds{gen_ai_operation_name, gen_ai_provider_name,
  gen_ai_request_model, error_type}``: seconds per model call (``error_type`` empty for a
  call that succeeded);
* ``gen_ai_client_token_usage{gen_ai_operation_name, gen_ai_provider_name,
  gen_ai_request_model, gen_ai_token_type}``: tokens per successful call, ``input`` or
  ``output``.

The bucket boundaries are the conventions' advisory ones (seconds 0.01, 0.02, … 81.92;
tokens 1, 4, … 4^13), the same on both sides, so the runner's counts add up exactly. The
labels are the conventions' attributes only (no namespace or agent:
``swarmkit_model_tokens_total`` has those).

Counting once: the replica whose status write first records a Job's result
(``first_report``) adds it, after the write succeeded. A Run already carrying that result
when a replica starts or becomes leader is not counted again, so ``sum(rate(...))`` over
replicas counts each call once; a replica that dies between its write and the count loses
that Job's calls (at most once, never twice). Each Job of a Run reports only the calls it
made: a run resumed after a review replays the calls before it parked from its journal
(no model call), so a call is in one Job's report only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

from prometheus_client import REGISTRY
from prometheus_client import utils as prometheus_utils
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from swarmkit_api.bundle import RunResult
from swarmkit_api.conditions import REASON_AWAITING_REVIEW
from swarmkit_api.genai_metrics import DURATION_BUCKETS, TOKEN_BUCKETS, Buckets

from .builders import run_status as rs
from .conditions import get_condition

DURATION_NAME = "gen_ai_client_operation_duration_seconds"
DURATION_HELP = "GenAI operation duration (seconds per model call of the Runs)."
DURATION_LABELS = (
    "gen_ai_operation_name",
    "gen_ai_provider_name",
    "gen_ai_request_model",
    "error_type",
)
TOKENS_NAME = "gen_ai_client_token_usage"
TOKENS_HELP = "Number of input and output tokens used (per model call of the Runs)."
TOKENS_LABELS = (
    "gen_ai_operation_name",
    "gen_ai_provider_name",
    "gen_ai_request_model",
    "gen_ai_token_type",
)


#: How prometheus_client writes a bucket's ``le`` (``1.0``, ``6.7108864e+07``, ``+Inf``), so
#: these buckets read like its own histograms' (the function has no annotations).
_le = cast(Callable[[float], str], prometheus_utils.floatToGoString)


class _Series:
    """One label set's histogram: per-bucket counts (not cumulative) and the sum."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def add(self, buckets: Buckets, bounds: Sequence[float]) -> None:
        dense = buckets.dense(bounds)
        if dense is None:
            return  # another bucket layout (a runner of another version): not comparable
        for i, n in enumerate(dense):
            self.counts[i] += n
        self.sum += buckets.sum

    def cumulative(self, bounds: Sequence[float]) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip([*bounds, float("inf")], self.counts, strict=True):
            running += n
            out.append((_le(bound), running))
        return out


class GenAiCollector(Collector):
    """The two histograms, filled by :meth:`add` and rendered at scrape time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._duration: dict[tuple[str, ...], _Series] = {}
        self._tokens: dict[tuple[str, ...], _Series] = {}

    def add(self, result: RunResult) -> None:
        with self._lock:
            for entry in result.genai:
                base = (entry.operation, entry.provider, entry.model)
                key = (*base, entry.error_type or "")
                self._series(self._duration, key, DURATION_BUCKETS).add(
                    entry.duration, DURATION_BUCKETS
                )
                for kind, buckets in (
                    ("input", entry.input_tokens),
                    ("output", entry.output_tokens),
                ):
                    if buckets is not None:
                        series = self._series(self._tokens, (*base, kind), TOKEN_BUCKETS)
                        series.add(buckets, TOKEN_BUCKETS)

    @staticmethod
    def _series(
        table: dict[tuple[str, ...], _Series], key: tuple[str, ...], bounds: Sequence[float]
    ) -> _Series:
        series = table.get(key)
        if series is None:
            series = table[key] = _Series(bounds)
        return series

    def collect(self) -> Iterator[HistogramMetricFamily]:
        with self._lock:
            yield _family(DURATION_NAME, DURATION_HELP, DURATION_LABELS, self._duration, "s")
            yield _family(TOKENS_NAME, TOKENS_HELP, TOKENS_LABELS, self._tokens, "")

    def describe(self) -> list[Any]:
        return []


def _family(
    name: str,
    doc: str,
    labels: Sequence[str],
    table: Mapping[tuple[str, ...], _Series],
    unit: str,
) -> HistogramMetricFamily:
    bounds = DURATION_BUCKETS if unit == "s" else TOKEN_BUCKETS
    family = HistogramMetricFamily(name, doc, labels=list(labels))
    for key, series in sorted(table.items()):
        family.add_metric(list(key), series.cumulative(bounds), series.sum)
    return family


COLLECTOR = GenAiCollector()
REGISTRY.register(COLLECTOR)


def first_report(before: Mapping[str, Any], verdict: rs.Verdict) -> bool:
    """Whether writing ``verdict`` over status ``before`` is the first time the Run's status
    records this Job's result: the Run becomes final (no ``completionTime`` yet) or parks
    for a review from a Job whose parking it did not record yet."""
    if verdict.result is None or before.get("completionTime"):
        return False
    cond = get_condition(before.get("conditions"), rs.SUCCEEDED) or {}
    job = verdict.job_name or before.get("jobName")
    parked_before = cond.get("reason") == REASON_AWAITING_REVIEW
    return not (parked_before and before.get("jobName") == job)


def record(result: RunResult) -> None:
    """Add a Job's reported model calls to the histograms."""
    COLLECTOR.add(result)
