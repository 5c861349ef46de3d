"""The tracing types the runner's code and the OpenTelemetry tracer share (no imports of
ours): :mod:`.spans` holds the no-op tracer and switches the real one on, :mod:`.otel`
implements these on the SDK; both import this module, neither the other at import time."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Protocol

AttrValue = str | bool | int | float | Sequence[str]
Attrs = Mapping[str, AttrValue | None]


class Span(Protocol):
    #: Whether content is recorded (build prompts/outputs for :meth:`content` only then).
    capturing: bool

    def set(self, key: str, value: AttrValue | None) -> None:
        """Set one attribute (``None`` is left out; strings are scrubbed of secrets)."""

    def content(self, key: str, value: object) -> None:
        """Record prompt/output/argument/result content: only when the Workspace opted
        in, capped and scrubbed; a no-op otherwise."""

    def error(self, error_type: str, message: str = "") -> None:
        """Mark the span failed (``error.type`` and an ERROR status)."""


class Tracer(Protocol):
    def span(
        self, name: str, kind: str = "internal", attributes: Attrs | None = None
    ) -> contextlib.AbstractContextManager[Span]:
        """A child span of the current one (``kind``: internal, client or server)."""

    def record_chat(
        self, attributes: Attrs, seconds: float, input_tokens: int, output_tokens: int
    ) -> None:
        """The GenAI client metrics of one model call (``gen_ai.client.operation.duration``,
        ``gen_ai.client.token.usage``), when metrics are on."""

    def inject(self, carrier: dict[str, str]) -> None:
        """Write the current context (``traceparent``, ``tracestate``) into ``carrier``."""

    def remote(self, carrier: Mapping[str, str]) -> contextlib.AbstractContextManager[None]:
        """Make the context a peer sent (``traceparent``) the parent of the spans opened
        inside (a served Topology, the MCP gateway)."""

    def shutdown(self) -> None:
        """Export what is left (the process is about to exit)."""


class Scrubber(Protocol):
    def scrub(self, text: str) -> str: ...

    def remember(self, value: str) -> None: ...
