"""GenAI client metrics: the runner's per-call buckets become the operator's Prometheus
histograms, bucket for bucket what the real libraries produce from the raw values.

Oracles: prometheus_client's own ``Histogram`` observing the same values with the same
boundaries (the exposition a scrape must see), and the OpenTelemetry SDK's histogram with
the conventions' advisory boundaries (what the runner's OTLP metrics say for the same calls).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from swarmkit_api.bundle import MAX_RESULT_BYTES, RunResult
from swarmkit_api.genai_metrics import DURATION_BUCKETS, MAX_ENTRIES, TOKEN_BUCKETS
from swarmkit_operator import genai_metrics
from swarmkit_operator.builders import run_status as rs
from swarmkit_runner.genai_stats import GenAiStats

#: (seconds, input tokens, output tokens) of successful calls; the edges sit on boundaries.
CALLS = [(0.01, 1, 4), (0.011, 5, 16), (0.3, 1024, 17), (2.56, 5000, 0), (120.0, 70_000_000, 3)]
FAILED = [0.02, 9.5]


def _samples(registry: CollectorRegistry, name: str) -> dict[tuple[Any, ...], float]:
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            if s.name.startswith(name):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _runner_report(stats: GenAiStats) -> RunResult:
    result = RunResult(outcome="Succeeded", genai=stats.report())
    # Through the termination message, as the operator reads it.
    parsed = rs.parse_result(result.to_termination_message())
    assert parsed is not None
    return parsed


def _collector_registry(*results: RunResult) -> CollectorRegistry:
    collector = genai_metrics.GenAiCollector()
    for r in results:
        collector.add(r)
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def _stats() -> GenAiStats:
    stats = GenAiStats()
    for seconds, tokens_in, tokens_out in CALLS:
        stats.record("chat", "openai", "gpt-x", seconds, tokens_in, tokens_out)
    for seconds in FAILED:
        stats.record("chat", "openai", "gpt-x", seconds, error_type="ModelError")
    return stats


def test_the_exposition_equals_prometheus_clients_own_histograms_of_the_raw_calls() -> None:
    # Two reports (two Runs, or the two Jobs of a resumed one) add up.
    report = _runner_report(_stats())
    ours = _collector_registry(report, report)

    oracle = CollectorRegistry()
    base = ["gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"]
    duration = Histogram(
        "gen_ai_client_operation_duration",  # + unit: ..._seconds
        "x",
        [*base, "error_type"],
        buckets=DURATION_BUCKETS,
        registry=oracle,
        unit="seconds",
    )
    tokens = Histogram(
        "gen_ai_client_token_usage",
        "x",
        [*base, "gen_ai_token_type"],
        buckets=TOKEN_BUCKETS,
        registry=oracle,
    )
    for _ in range(2):
        for seconds, tokens_in, tokens_out in CALLS:
            duration.labels("chat", "openai", "gpt-x", "").observe(seconds)
            tokens.labels("chat", "openai", "gpt-x", "input").observe(tokens_in)
            tokens.labels("chat", "openai", "gpt-x", "output").observe(tokens_out)
        for seconds in FAILED:
            duration.labels("chat", "openai", "gpt-x", "ModelError").observe(seconds)

    for name in ("gen_ai_client_operation_duration_seconds", "gen_ai_client_token_usage"):
        got, want = _samples(ours, name), _samples(oracle, name)
        got_sums = {k: v for k, v in got.items() if k[0].endswith("_sum")}
        want_sums = {k: v for k, v in want.items() if k[0].endswith("_sum")}
        assert {k: v for k, v in got.items() if k not in got_sums} == {
            k: v for k, v in want.items() if k not in want_sums and not k[0].endswith("_created")
        }, name
        assert got_sums.keys() == want_sums.keys()
        for k, v in want_sums.items():
            assert abs(got_sums[k] - v) < 1e-6, k

    # A failed call has a duration and no tokens.
    failed_count = ours.get_sample_value(
        "gen_ai_client_operation_duration_seconds_count",
        {
            "gen_ai_operation_name": "chat",
            "gen_ai_provider_name": "openai",
            "gen_ai_request_model": "gpt-x",
            "error_type": "ModelError",
        },
    )
    assert failed_count == 4


def test_the_runners_buckets_are_the_opentelemetry_sdks_for_the_same_calls() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    meter = MeterProvider([reader]).get_meter("t")
    otel_duration = meter.create_histogram(
        "gen_ai.client.operation.duration",
        unit="s",
        explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
    )
    otel_tokens = meter.create_histogram(
        "gen_ai.client.token.usage",
        unit="{token}",
        explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS),
    )
    for seconds, tokens_in, _ in CALLS:
        otel_duration.record(seconds)
        otel_tokens.record(tokens_in)
    data = reader.get_metrics_data()
    assert data is not None
    points = {
        m.name: m.data.data_points[0]
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }

    (entry,) = _runner_report(_stats()).genai[:1]
    assert entry.error_type is None and entry.input_tokens is not None
    sdk_duration = points["gen_ai.client.operation.duration"]
    assert tuple(sdk_duration.explicit_bounds) == DURATION_BUCKETS
    assert list(sdk_duration.bucket_counts) == entry.duration.dense(DURATION_BUCKETS)
    sdk_tokens = points["gen_ai.client.token.usage"]
    assert tuple(sdk_tokens.explicit_bounds) == TOKEN_BUCKETS
    assert list(sdk_tokens.bucket_counts) == entry.input_tokens.dense(TOKEN_BUCKETS)


def test_the_report_stays_small_and_bounded() -> None:
    stats = GenAiStats()
    for i in range(MAX_ENTRIES + 5):
        for seconds, tokens_in, tokens_out in CALLS:
            stats.record("chat", "openai", f"model-{i}", seconds, tokens_in, tokens_out)
    report = stats.report()
    assert len(report) == MAX_ENTRIES
    # All entries and a long output still fit the 4 KiB termination message; the output
    # is what gives way.
    result = RunResult(outcome="Succeeded", output="x" * 4000, genai=report)
    text = result.to_termination_message()
    assert len(text.encode()) <= MAX_RESULT_BYTES
    parsed = rs.parse_result(text)
    assert parsed is not None and parsed.genai == report and parsed.output_truncated
    # A typical stage (one model, ten calls) costs the message about 200 bytes.
    one = GenAiStats()
    for _ in range(10):
        one.record("chat", "swarmkit.replay", "replay", 0.02, 900, 40)
    small = RunResult(outcome="Succeeded", genai=one.report()).to_termination_message()
    assert len(small) - len(RunResult(outcome="Succeeded").to_termination_message()) < 250


def test_a_secret_in_a_model_name_is_scrubbed_in_the_report() -> None:
    stats = GenAiStats()
    stats.record("chat", "swarmkit.http", "tenant-s3cr3t-model", 0.5, 1, 1)
    (entry,) = stats.report(lambda s: s.replace("s3cr3t", "[REDACTED]"))
    assert entry.model == "tenant-[REDACTED]-model"


def _verdict(reason: str, job: str, result: RunResult | None) -> rs.Verdict:
    status: Any = "True" if reason == "Succeeded" else "Unknown"
    phase: Any = "Finished" if reason == "Succeeded" else "Parked"
    return rs.Verdict(
        phase=phase, status=status, reason=reason, message="", job_name=job, result=result
    )


def _status(reason: str, job: str, completed: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {
        "jobName": job,
        "conditions": [{"type": "Succeeded", "status": "Unknown", "reason": reason}],
    }
    if completed:
        status["completionTime"] = "2026-12-05T00:00:00Z"
    return status


def test_each_jobs_report_is_first_recorded_once() -> None:
    result = RunResult(outcome="Succeeded")
    parked = RunResult(outcome="AwaitingReview")
    # Running → final: first time; a final Run written again (another replica, a restart):
    # not again.
    assert genai_metrics.first_report(_status("Running", "j1"), _verdict("Succeeded", "j1", result))
    assert not genai_metrics.first_report(
        _status("Succeeded", "j1", completed=True), _verdict("Succeeded", "j1", result)
    )
    # Parking: first time; the same parked Job seen again: not again; the resumed Job's
    # final result: first time.
    assert genai_metrics.first_report(
        _status("Running", "j1"), _verdict("AwaitingReview", "j1", parked)
    )
    assert not genai_metrics.first_report(
        _status("AwaitingReview", "j1"), _verdict("AwaitingReview", "j1", parked)
    )
    assert genai_metrics.first_report(
        _status("AwaitingReview", "j1"), _verdict("Succeeded", "j2", result)
    )
    # No report (the operator decided, e.g. a cancel): nothing to count.
    assert not genai_metrics.first_report(_status("Running", "j1"), _verdict("Succeeded", "", None))
