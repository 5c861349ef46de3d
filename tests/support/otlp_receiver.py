"""A minimal OTLP/HTTP metrics receiver for tests: decodes what the runner posts to
``/v1/metrics`` with the protocol's own types (``opentelemetry-proto``) and keeps every
data point. (Jaeger, the tests' trace backend, accepts no metrics.)"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)


@dataclass(frozen=True)
class HistogramPoint:
    metric: str
    unit: str
    attributes: dict[str, Any]
    count: int
    sum: float
    bounds: tuple[float, ...]


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class OtlpMetricsReceiver:
    """Serves ``POST /v1/metrics`` on a free loopback port (a context manager)."""

    def __init__(self) -> None:
        self.points: list[HistogramPoint] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path == "/v1/metrics":
                    request = ExportMetricsServiceRequest()
                    request.ParseFromString(body)
                    receiver._keep(request)
                    reply = ExportMetricsServiceResponse().SerializeToString()
                else:
                    reply = b""  # /v1/traces: accepted and dropped
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _keep(self, request: ExportMetricsServiceRequest) -> None:
        for rm in request.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.WhichOneof("data") != "histogram":
                        continue
                    for p in m.histogram.data_points:
                        attrs = {a.key: _value(a.value) for a in p.attributes}
                        self.points.append(
                            HistogramPoint(
                                m.name, m.unit, attrs, p.count, p.sum, tuple(p.explicit_bounds)
                            )
                        )

    def __enter__(self) -> OtlpMetricsReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
