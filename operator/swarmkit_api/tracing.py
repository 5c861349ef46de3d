"""Traces: a Workspace's ``tracing`` and the one trace each Run gets.

A Run's trace id is its uid (a UUID is 128 bits, a W3C trace id too), so every process that
knows the Run (the operator's reconciles, each Job of a resumed run, ``kubectl swarmkit
logs``) names the same trace without storing anything; the Run's root span id is derived
from the uid the same way. Sampling is decided from a hash of the trace id, so a resumed
stage is sampled exactly when the first one was.
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from .base import ApiModel
from .common import SecretKeyRef

#: Longest content (prompt, output, tool argument or result) a span may carry.
MAX_CONTENT_CHARS = 65536


class TracingSpec(ApiModel):
    """Where a Workspace's Runs send their OpenTelemetry traces (OTLP/HTTP)."""

    endpoint: str = Field(
        min_length=1,
        max_length=2048,
        description="OTLP/HTTP base URL (the runner posts to <endpoint>/v1/traces), e.g. "
        "http://jaeger-collector.observability:4318. A declared destination: the Run's "
        "NetworkPolicy and egress check allow it.",
    )
    headers_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description="A Secret key holding the exporter's headers as OTEL_EXPORTER_OTLP_HEADERS "
        "expects them (key1=value1,key2=value2), e.g. an API key; never copied, and "
        "scrubbed from every span.",
    )
    sampling_ratio: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="Share of Runs traced (decided from the Run's trace id: a resumed run "
        "keeps its decision).",
    )
    metrics: bool = Field(
        default=False,
        description="Also export the GenAI client metrics (gen_ai.client.token.usage, "
        "gen_ai.client.operation.duration) over OTLP/HTTP to the same endpoint; the "
        "collector must accept metrics (Jaeger does not).",
    )
    capture_content: bool = Field(
        default=False,
        description="Record prompts, outputs, tool arguments and results on spans (capped at "
        "maxContentChars, secrets scrubbed). Off by default.",
    )
    max_content_chars: int = Field(
        default=2048,
        ge=1,
        le=MAX_CONTENT_CHARS,
        description="With captureContent: the cap per recorded value.",
    )

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"tracing.endpoint must be an http(s) URL with a host, got {value!r} "
                "(OTLP/HTTP, e.g. http://collector:4318)"
            )
        return value


def trace_id_for(run_uid: str) -> str:
    """The Run's trace id: its uid as 32 lowercase hex digits."""
    hexed = run_uid.replace("-", "").lower()
    if len(hexed) == 32 and all(c in "0123456789abcdef" for c in hexed) and set(hexed) != {"0"}:
        return hexed
    return hashlib.sha256(run_uid.encode()).hexdigest()[:32]


def root_span_id(run_uid: str) -> str:
    """The span id of the Run's root span (the operator's ``swarmkit.run``)."""
    return hashlib.sha256(f"{run_uid}/run".encode()).hexdigest()[:16]


def sampled(trace_id: str, ratio: float) -> bool:
    """Whether ``trace_id`` is sampled at ``ratio``: a hash of it below ratio * 2**64.

    Not OpenTelemetry's ``TraceIdRatioBased`` rule (the trace id's low 64 bits): in a
    trace id made from a UUIDv4 those bits start with the variant bits ``10``, so that rule
    would trace every Run at ratios >= 0.75 and none below 0.5.
    """
    if ratio >= 1.0:
        return True
    digest = hashlib.sha256(trace_id.encode()).hexdigest()
    return int(digest[:16], 16) < round(ratio * (1 << 64))


def traceparent(run_uid: str, ratio: float = 1.0) -> str:
    """The W3C ``traceparent`` the Run's pods get: its trace, parented on its root span."""
    trace_id = trace_id_for(run_uid)
    flags = "01" if sampled(trace_id, ratio) else "00"
    return f"00-{trace_id}-{root_span_id(run_uid)}-{flags}"
