"""The OpenTelemetry SDK behind :mod:`.spans` (imported only when tracing is on).

Spans go to the OTLP/HTTP endpoint of the environment through a batch processor, which
:meth:`OtelTracer.shutdown` flushes before the process exits. The parent of the first span
is ``TRACEPARENT`` (the Run's trace, from the operator). Every string the runner puts on a
span (name, attributes, status message) passes through the secret scrubber first; content
(prompts, outputs, tool arguments and results) only when the Workspace opted in, then capped.
Exceptions are not recorded as events: their text and stack could carry what the scrubber
has not seen.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .span_api import Attrs, AttrValue, Scrubber, Span

KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT, "server": SpanKind.SERVER}
TRUNCATED = "…[truncated]"
#: How long one export request may take when OTEL_EXPORTER_OTLP_TIMEOUT is not set.
EXPORT_TIMEOUT_SECONDS = 3.0
#: How long the process waits for the final export before it exits anyway.
SHUTDOWN_SECONDS = 4.0
_PROPAGATOR = TraceContextTextMapPropagator()


class _OtelSpan:
    def __init__(self, span: trace.Span, owner: OtelTracer) -> None:
        self._span = span
        self._owner = owner
        self.failed = False
        self.capturing = owner.content_chars > 0

    def set(self, key: str, value: AttrValue | None) -> None:
        if value is not None:
            self._span.set_attribute(key, self._owner.clean(value))

    def content(self, key: str, value: object) -> None:
        cap = self._owner.content_chars
        if cap <= 0:
            return
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        if len(text) > cap:
            text = text[:cap] + TRUNCATED
        self._span.set_attribute(key, self._owner.secrets.scrub(text))

    def error(self, error_type: str, message: str = "") -> None:
        self.failed = True
        self._span.set_attribute("error.type", self._owner.secrets.scrub(error_type))
        description = self._owner.secrets.scrub(message)[:500]
        self._span.set_status(Status(StatusCode.ERROR, description or None))


class OtelTracer:
    """A :class:`~.span_api.Tracer` exporting to OTLP/HTTP."""

    def __init__(
        self,
        environ: Mapping[str, str],
        secrets: Scrubber,
        service: str,
        resource: Mapping[str, str],
        content_chars: int,
    ) -> None:
        self.secrets = secrets
        self.content_chars = content_chars
        attrs = {
            "service.name": environ.get("OTEL_SERVICE_NAME") or service,
            # One per process: each Job of a resumed Run is its own instance.
            "service.instance.id": str(uuid.uuid4()),
            **resource,
        }
        # Shut down by :meth:`shutdown` (bounded), not by the SDK's exit hook (unbounded).
        self._provider = TracerProvider(resource=Resource.create(attrs), shutdown_on_exit=False)
        # A collector that is down must not hold the Run's exit for the SDK's default 10 s
        # of retries: 3 s unless OTEL_EXPORTER_OTLP_TIMEOUT says otherwise.
        timeout = environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or environ.get(
            "OTEL_EXPORTER_OTLP_TIMEOUT"
        )
        exporter = OTLPSpanExporter(timeout=None if timeout else EXPORT_TIMEOUT_SECONDS)
        self._provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=500))
        self._tracer = self._provider.get_tracer("swarmkit_runner")
        self._meters = _GenAiMetrics(environ, self._provider.resource)
        parent = environ.get("TRACEPARENT", "").strip()
        if parent:
            carrier = {"traceparent": parent, "tracestate": environ.get("TRACESTATE", "")}
            # Attached once, before the run's tasks exist: every task copies it.
            otel_context.attach(_PROPAGATOR.extract(carrier))

    def clean(self, value: AttrValue) -> AttrValue:
        if isinstance(value, str):
            return self.secrets.scrub(value)
        if isinstance(value, bool | int | float):
            return value
        return [self.secrets.scrub(str(v)) for v in value]

    @contextlib.contextmanager
    def span(
        self, name: str, kind: str = "internal", attributes: Attrs | None = None
    ) -> Iterator[Span]:
        attrs = {k: self.clean(v) for k, v in (attributes or {}).items() if v is not None}
        with self._tracer.start_as_current_span(
            self.secrets.scrub(name),
            kind=KINDS[kind],
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        ) as raw:
            handle = _OtelSpan(raw, self)
            try:
                yield handle
            except BaseException as exc:
                # A run parking for review is not a failure of the span it parks in.
                if not handle.failed and getattr(exc, "outcome", None) != "AwaitingReview":
                    code = getattr(exc, "code", None)  # a ToolError's code names the class
                    handle.error(code if isinstance(code, str) else type(exc).__name__, str(exc))
                raise

    def record_chat(
        self, attributes: Attrs, seconds: float, input_tokens: int, output_tokens: int
    ) -> None:
        attrs = {k: self.clean(v) for k, v in attributes.items() if v is not None}
        self._meters.record(attrs, seconds, input_tokens, output_tokens)

    def inject(self, carrier: dict[str, str]) -> None:
        _PROPAGATOR.inject(carrier)

    @contextlib.contextmanager
    def remote(self, carrier: Mapping[str, str]) -> Iterator[None]:
        token = otel_context.attach(_PROPAGATOR.extract(dict(carrier)))
        try:
            yield
        finally:
            otel_context.detach(token)

    def shutdown(self) -> None:
        """Export what is left, for at most :data:`SHUTDOWN_SECONDS` (a dead collector must
        not hold the Run's exit: its spans are then lost, the Run is not)."""

        def close() -> None:
            self._provider.shutdown()
            self._meters.shutdown()

        worker = threading.Thread(target=close, daemon=True)
        worker.start()
        worker.join(SHUTDOWN_SECONDS)


#: The conventions' advisory bucket boundaries (gen-ai-metrics.md).
TOKEN_BUCKETS = [4.0**i for i in range(14)]
DURATION_BUCKETS = [0.01 * 2**i for i in range(14)]


class _GenAiMetrics:
    """``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration`` histograms,
    exported over OTLP/HTTP when ``OTEL_METRICS_EXPORTER=otlp`` (the SDK's metrics
    modules are imported only then)."""

    def __init__(self, environ: Mapping[str, str], resource: Any) -> None:
        self._provider: Any = None
        if environ.get("OTEL_METRICS_EXPORTER", "").strip().lower() != "otlp":
            return
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(timeout=EXPORT_TIMEOUT_SECONDS), export_interval_millis=60_000
        )
        self._provider = MeterProvider([reader], resource=resource, shutdown_on_exit=False)
        meter = self._provider.get_meter("swarmkit_runner")
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )

    def record(
        self, attrs: Mapping[str, Any], seconds: float, input_tokens: int, output_tokens: int
    ) -> None:
        if self._provider is None:
            return
        self._duration.record(seconds, dict(attrs))
        if "error.type" in attrs:
            return
        base = {k: v for k, v in attrs.items() if k != "error.type"}
        self._tokens.record(input_tokens, {**base, "gen_ai.token.type": "input"})
        self._tokens.record(output_tokens, {**base, "gen_ai.token.type": "output"})

    def shutdown(self) -> None:
        if self._provider is not None:
            self._provider.shutdown()
