"""Tracing hooks: the spans the runner opens, a no-op unless tracing is on.

The runner's code opens spans through :func:`tracer` (``invoke_agent``, ``chat``,
``execute_tool``, MCP and A2A client spans: :mod:`.traced`). By default that is
:data:`NO_TRACER`, which does nothing and imports nothing: a Run without tracing starts
exactly as fast as before (``tests/unit/runner/test_tracing_off.py`` checks that no
``opentelemetry`` module is loaded). :func:`enable_from_env` switches it on when the Job
sets an OTLP endpoint (the operator does, from the Workspace's ``tracing``); only then is
:mod:`.otel` (the OpenTelemetry SDK) imported.

The environment the operator sets (standard OpenTelemetry names where there is one):

* ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``): on.
* ``OTEL_EXPORTER_OTLP_HEADERS``: from a Secret; its values are scrubbed like any secret.
* ``TRACEPARENT``: the Run's trace (W3C); every span of the runner joins it.
* ``OTEL_TRACES_SAMPLER``/``OTEL_TRACES_SAMPLER_ARG``: read by the SDK.
* ``OTEL_METRICS_EXPORTER=otlp``: also the GenAI client metrics, to the same endpoint.
* ``SWARMKIT_TRACE_CONTENT_CHARS``: unset or 0, no prompt, output, tool argument or result
  is recorded; N > 0 records them, each capped at N characters (a Workspace opt-in).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from .span_api import Attrs, AttrValue, Scrubber, Span, Tracer

ENDPOINT_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
HEADERS_ENV = "OTEL_EXPORTER_OTLP_HEADERS"
CONTENT_ENV = "SWARMKIT_TRACE_CONTENT_CHARS"


class _NoSpan:
    capturing = False

    def set(self, key: str, value: AttrValue | None) -> None:
        pass

    def content(self, key: str, value: object) -> None:
        pass

    def error(self, error_type: str, message: str = "") -> None:
        pass


NO_SPAN = _NoSpan()


class _NoTracer:
    @contextlib.contextmanager
    def span(
        self, name: str, kind: str = "internal", attributes: Attrs | None = None
    ) -> Iterator[Span]:
        yield NO_SPAN

    def record_chat(
        self, attributes: Attrs, seconds: float, input_tokens: int, output_tokens: int
    ) -> None:
        pass

    def inject(self, carrier: dict[str, str]) -> None:
        pass

    @contextlib.contextmanager
    def remote(self, carrier: Mapping[str, str]) -> Iterator[None]:
        yield

    def shutdown(self) -> None:
        pass


NO_TRACER: Tracer = _NoTracer()
_current: list[Tracer] = [NO_TRACER]


def tracer() -> Tracer:
    """The process's tracer (:data:`NO_TRACER` unless :func:`enable_from_env` enabled one)."""
    return _current[0]


def enabled(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` asks for traces (an OTLP endpoint, and the SDK not disabled)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_ENV)


def content_chars(environ: Mapping[str, str]) -> int:
    """The content cap ``SWARMKIT_TRACE_CONTENT_CHARS`` (0: content is not recorded)."""
    raw = environ.get(CONTENT_ENV, "").strip()
    try:
        return max(0, int(raw)) if raw else 0
    except ValueError:
        return 0


def enable_from_env(
    environ: Mapping[str, str], secrets: Scrubber, service: str, resource: Mapping[str, str]
) -> Tracer:
    """Install the OpenTelemetry tracer when ``environ`` asks for one; the current tracer."""
    if not enabled(environ):
        return tracer()
    for item in environ.get(HEADERS_ENV, "").split(","):
        _, _, value = item.partition("=")
        if value.strip():
            secrets.remember(value.strip())
    from .otel import OtelTracer  # only now: the SDK costs start-up time

    _current[0] = OtelTracer(environ, secrets, service, resource, content_chars(environ))
    return _current[0]


def install(t: Tracer) -> None:
    """Make ``t`` the process's tracer (tests; :func:`enable_from_env` in the CLI)."""
    _current[0] = t
