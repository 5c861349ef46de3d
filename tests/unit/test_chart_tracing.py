"""The chart's ``tracing`` values: the operator's OTLP endpoint and headers (by reference)."""

from __future__ import annotations

from typing import Any

from tests.unit.test_chart_render import by_kind, render, render_error


def _env(values: dict[str, Any] | None) -> dict[str, Any]:
    [deployment] = by_kind(render(values), "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e for e in container["env"]}


def test_off_by_default() -> None:
    assert not {n for n in _env(None) if n.startswith("OTEL_")}


def test_endpoint_and_headers_from_a_secret() -> None:
    env = _env(
        {
            "tracing": {
                "endpoint": "http://otel-collector.observability:4318",
                "headersSecret": {"name": "otlp", "key": "headers"},
            }
        }
    )
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://otel-collector.observability:4318"
    assert env["OTEL_EXPORTER_OTLP_HEADERS"]["valueFrom"] == {
        "secretKeyRef": {"name": "otlp", "key": "headers"}
    }


def test_a_bad_endpoint_is_refused_by_the_values_schema() -> None:
    err = render_error({"tracing": {"endpoint": "otel-collector:4318"}})
    assert "tracing.endpoint" in err or "/tracing/endpoint" in err
