"""Pure: the environment that puts a Run's pod into the Run's trace.

Standard OpenTelemetry variables where there is one (the runner's SDK reads them):
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS`` (a ``secretKeyRef``: the
operator never reads the value), ``TRACEPARENT`` (the Run's trace and root span, the same
for every Job of the Run: a resumed run continues its trace), ``OTEL_TRACES_SAMPLER``
(``parentbased_always_on``: the sampling decision is the traceparent's flag, made from the
trace id by :func:`swarmkit_api.tracing.traceparent`), ``OTEL_METRICS_EXPORTER=otlp`` when
the Workspace asks for the GenAI client metrics; ours: ``SWARMKIT_TRACE_CONTENT_CHARS`` when
the Workspace opted in to content.
"""

from __future__ import annotations

from typing import Any

from swarmkit_api.tracing import TracingSpec, traceparent


def tracing_env(run_uid: str, spec: TracingSpec | None) -> list[dict[str, Any]]:
    """The env entries of a Run's runner container (none when tracing is off)."""
    if spec is None:
        return []
    return [
        {"name": "OTEL_TRACES_SAMPLER", "value": "parentbased_always_on"},
        {"name": "TRACEPARENT", "value": traceparent(run_uid, spec.sampling_ratio)},
        *exporter_env(spec),
    ]


def serving_env(spec: TracingSpec | None) -> list[dict[str, Any]]:
    """The env of a served Topology's pods: a call that brings a ``traceparent`` is traced
    as its caller decided; one without, at the Workspace's sampling ratio."""
    if spec is None:
        return []
    return [
        {"name": "OTEL_TRACES_SAMPLER", "value": "parentbased_traceidratio"},
        {"name": "OTEL_TRACES_SAMPLER_ARG", "value": str(spec.sampling_ratio)},
        *exporter_env(spec),
    ]


def exporter_env(spec: TracingSpec) -> list[dict[str, Any]]:
    """Where the spans go: the endpoint, the headers (by reference), the content opt-in."""
    env: list[dict[str, Any]] = [
        {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": spec.endpoint},
        {"name": "OTEL_EXPORTER_OTLP_PROTOCOL", "value": "http/protobuf"},
    ]
    if spec.headers_secret_ref is not None:
        ref = spec.headers_secret_ref
        env.append(
            {
                "name": "OTEL_EXPORTER_OTLP_HEADERS",
                "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
            }
        )
    if spec.metrics:
        env.append({"name": "OTEL_METRICS_EXPORTER", "value": "otlp"})
    if spec.capture_content:
        env.append({"name": "SWARMKIT_TRACE_CONTENT_CHARS", "value": str(spec.max_content_chars)})
    return env
