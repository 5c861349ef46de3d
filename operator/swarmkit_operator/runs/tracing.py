"""The operator's spans of a Run, in the Run's one trace.

A traced Run (its Workspace has ``tracing``, and the trace id is sampled) gets
``status.traceId`` when its first Job is created; the runner in every Job of the Run joins
that trace under the Run's root span (``TRACEPARENT``, :mod:`..builders.tracing`). When the
Run is final, this module exports the operator's side, if the operator itself has an OTLP
endpoint (the chart's ``tracing.endpoint`` → ``OTEL_EXPORTER_OTLP_ENDPOINT``):

* the root span ``swarmkit.run {namespace}/{name}`` with the Run's fixed root span id, from
  the first milestone this process saw to the final condition;
* ``reconcile`` (resolving the target), ``bundle`` (rendering and creating the bundle and
  NetworkPolicy), ``job.create``, ``review.wait`` and ``job.resume`` for a run that parked,
  ``observe`` (Job running → pod done), and ``condition {reason}``.

A scheduled Run's root span links to its schedule: every tick of a Topology's schedule
is a ``schedule {topology}`` span in one trace per schedule (trace id derived from
``<namespace>/<topology>``), linked both ways with the Run it started.

The children come from the milestones of :class:`~.state.RunState` (monotonic times of this
process): an operator that restarted mid-run exports the ones it saw. Spans are built after
the fact with their recorded start and end times and ids of the Run's trace, which is why
the root span is created with an id generator that hands out the Run's ids.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from swarmkit_api.tracing import TracingSpec, root_span_id, sampled, trace_id_for

from ..builders.job import TOPOLOGY_LABEL

#: The label :mod:`.schedule` puts on the Runs it starts (not imported: that is a cycle;
#: ``tests/unit/operator_runs/test_tracing_config.py`` keeps the two equal).
SCHEDULED_LABEL = "swarmkit.dev/scheduled"

log = logging.getLogger("swarmkit_operator.runs.tracing")

#: (span name, start milestone, end milestones in order of preference)
PHASES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("reconcile", "reconcile_start", ("resolved",)),
    ("bundle", "resolved", ("bundle_created",)),
    ("job.create", "bundle_created", ("job_created",)),
    ("review.wait", "review_created", ("decision_seen",)),
    ("job.resume", "decision_seen", ("resumed_job_created",)),
    ("observe", "job_created", ("pod_done_seen", "condition_final")),
)


def status_fields(run_uid: str, spec: TracingSpec | None) -> dict[str, Any]:
    """``status.traceId`` for a traced, sampled Run (nothing otherwise)."""
    if spec is None:
        return {}
    trace_id = trace_id_for(run_uid)
    return {"traceId": trace_id} if sampled(trace_id, spec.sampling_ratio) else {}


def exporting(env: Mapping[str, str]) -> bool:
    """Whether the operator exports its own spans (an OTLP endpoint in its environment)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    )


class RunSpans:
    """Exports a finished Run's operator spans (the SDK is imported on first use)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        #: The ``OTEL_*`` settings, read once at start-up (``RunsSettings.otel``).
        self._env = dict(environ)
        self._exporting = exporting(self._env)
        self._provider: Any = None
        self._broken = False

    def _setup(self) -> Any:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

        class RunIds(RandomIdGenerator):
            """Hands out the Run's trace and root span id once armed; random otherwise."""

            next_ids: tuple[int, int] | None = None

            def generate_trace_id(self) -> int:
                if self.next_ids is not None:
                    return self.next_ids[0]
                return super().generate_trace_id()

            def generate_span_id(self) -> int:
                if self.next_ids is not None:
                    span_id = self.next_ids[1]
                    self.next_ids = None
                    return span_id
                return super().generate_span_id()

        self._ids = RunIds()
        service = self._env.get("OTEL_SERVICE_NAME") or "swarmkit-operator"
        provider = TracerProvider(
            resource=Resource.create({"service.name": service}), id_generator=self._ids
        )
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        self._provider = provider
        return provider

    def export(
        self,
        run: Any,
        reason: str,
        status: str,
        milestones: Mapping[str, float],
        now_mono: float | None = None,
    ) -> bool:
        """Export the operator's spans of the final ``run`` (a RunView); False when off."""
        trace_id = str(run.status.get("traceId") or "")
        if not trace_id or self._broken or not self._exporting:
            return False
        try:
            provider = self._provider or self._setup()
        except ImportError as exc:
            self._broken = True
            log.warning("tracing: the OpenTelemetry SDK is not installed (%s); no spans", exc)
            return False
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        clock = _Clock(time.monotonic() if now_mono is None else now_mono, time.time_ns())
        marks = dict(milestones)
        start = clock.wall(min(marks.values(), default=clock.now_mono))
        tracer = provider.get_tracer("swarmkit_operator")
        links = self._schedule_links(tracer, run, trace_id, start)
        self._ids.next_ids = (int(trace_id, 16), int(root_span_id(run.uid), 16))
        root = tracer.start_span(
            f"swarmkit.run {run.namespace}/{run.name}",
            context=trace.set_span_in_context(trace.INVALID_SPAN),
            kind=SpanKind.INTERNAL,
            start_time=start,
            attributes={
                "swarmkit.run.name": run.name,
                "swarmkit.run.uid": run.uid,
                "k8s.namespace.name": run.namespace,
                "swarmkit.run.reason": reason,
                "swarmkit.run.resumes": int(run.status.get("resumes") or 0),
                "k8s.job.name": str(run.status.get("jobName") or ""),
                "swarmkit.scheduled": bool(links),
            },
            links=links,
        )
        self._ids.next_ids = None
        _children(tracer, trace.set_span_in_context(root), marks, clock, reason, status)
        if status == "False":
            root.set_status(Status(StatusCode.ERROR, reason))
        root.end(end_time=clock.wall(marks.get("condition_final", clock.now_mono)))
        return True

    def _schedule_links(self, tracer: Any, run: Any, trace_id: str, start: int) -> list[Any]:
        """A scheduled Run's link to its schedule's tick: the tick is a span of its own trace
        (one per schedule), linked with the Run's root span; [] for a Run not scheduled."""
        from opentelemetry import trace

        topology = run.labels.get(TOPOLOGY_LABEL)
        if run.labels.get(SCHEDULED_LABEL) != "true" or not topology:
            return []
        schedule = trace_id_for(f"{run.namespace}/{topology}/schedule")
        self._ids.next_ids = (int(schedule, 16), int(root_span_id(f"{run.uid}/tick"), 16))
        root_ctx = trace.SpanContext(
            int(trace_id, 16),
            int(root_span_id(run.uid), 16),
            is_remote=True,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
        tick = tracer.start_span(
            f"schedule {topology}",
            context=trace.set_span_in_context(trace.INVALID_SPAN),
            start_time=start,
            attributes={"swarmkit.topology": topology, "k8s.namespace.name": run.namespace},
            links=[trace.Link(root_ctx, {"swarmkit.run.name": run.name})],
        )
        tick.end(end_time=start)
        return [trace.Link(tick.get_span_context(), {"swarmkit.schedule": topology})]

    def flush(self) -> None:
        if self._provider is not None:
            self._provider.force_flush()


@dataclass(frozen=True)
class _Clock:
    """This process's monotonic milestone times as wall-clock nanoseconds (span times)."""

    now_mono: float
    now_ns: int

    def wall(self, mono: float) -> int:
        return self.now_ns - int((self.now_mono - mono) * 1e9)


def _children(
    tracer: Any,
    parent: Any,
    marks: Mapping[str, float],
    clock: _Clock,
    reason: str,
    status: str,
) -> None:
    """The root span's children: one span per :data:`PHASES` whose milestones this process
    saw, then ``condition {reason}`` at the final condition."""
    for name, begin, ends in PHASES:
        end = next((marks[e] for e in ends if e in marks), None)
        if begin in marks and end is not None and end >= marks[begin]:
            tracer.start_span(name, context=parent, start_time=clock.wall(marks[begin])).end(
                end_time=clock.wall(end)
            )
    final = clock.wall(marks.get("condition_final", clock.now_mono))
    cond = tracer.start_span(
        f"condition {reason}",
        context=parent,
        start_time=final,
        attributes={
            "swarmkit.condition.type": "Succeeded",
            "swarmkit.condition.status": status,
        },
    )
    cond.end(end_time=final)
