"""Prometheus metrics of the operator (served on ``--metrics-port``, default 8080).

* ``swarmkit_reconcile_total{kind, outcome}``: reconciles by kind and outcome (``changed``
  wrote status or a ConfigMap, ``unchanged``, ``deferred`` waited for an input still being
  reconciled, ``gone``, ``error``; the gateways controller, kind ``Gateway``, counts
  ``reconciled`` and ``error``; the mailbox webhook deliveries are kind
  ``MailboxDelivery``). Every controller's workers count them the same way
  (``runtime/workqueue.py``).
* ``swarmkit_reconcile_duration_seconds{kind}``: reconcile latency.
* ``swarmkit_objects{kind, condition, status}``: objects by condition, computed at scrape
  time from the operator's in-memory indexes.
* ``swarmkit_api_requests_total{verb, resource, code}``: Kubernetes API calls made by the
  operator's own client (the ``k8s`` package; kopf's watches are not counted).
* ``swarmkit_workqueue_depth`` / ``swarmkit_workqueue_retries_total{kind}``.
* ``swarmkit_events_total{type}``: Kubernetes Events posted.
* ``swarmkit_skill_loads_total{namespace, skill}``: agents that loaded the skill
  (``load_skill``) in finished Runs.
* ``swarmkit_skill_script_runs_total{namespace, skill, outcome}``: runs of the skill's
  scripts in finished Runs, ``outcome`` ``ok`` or ``failed`` (non-zero exit or timeout).
* ``swarmkit_funnel_gates_total{namespace, funnel, state}``: funnel approvals opened
  (``AwaitingApproval``, once per approval round) and settled (``Approved``, ``Rejected``,
  ``Expired``, ``RevisionRequested``).
* ``swarmkit_funnel_gate_attempts{funnel}``: drafts per gated artifact that reached the
  approval (1 = passed the automated layers first time).
* ``swarmkit_funnel_layer_results_total{namespace, funnel, layer, outcome}``: the automated
  layers' outcomes (``validate``: ok, autocorrect, failed; ``judge``: ok, below_threshold,
  error; ``review``: ok, route_back) over the drafts of each approval round, and
  ``swarmkit_funnel_retries_total{namespace, funnel}`` the retries they asked for; from the
  gate report the runner attaches to the approval.
  Funnel metrics count a transition of a Run's ``status.gates`` once: when an entry first
  shows a state in the status the operator read (a leader that restarts and re-reads a
  Run whose status has it does not count it again). Like every counter they start at zero
  in each operator process (``rate()``/``increase()`` handle the reset).
* ``swarmkit_spend_total{namespace, agent, model, currency}``: cost of finished Runs, per
  agent and model (a float in currency units: metrics only; budgets count integer
  micro-units). Unpriced use is not added as 0: it counts in
  ``swarmkit_spend_unknown_total{namespace, agent, model}`` (finished Runs' agent-models).
* ``swarmkit_model_tokens_total{namespace, agent, model, type}``: tokens of finished Runs,
  ``type`` ``input`` (uncached), ``cached_input`` or ``output``.
* ``swarmkit_eval_pass_rate{namespace, evalset, target, version}`` and
  ``swarmkit_eval_score{...}``: each side of the latest finished EvalRun of an EvalSet
  (set when it reaches its verdict, and again from its status when an operator starts);
  ``swarmkit_evalruns_total{namespace, evalset, verdict}``: verdicts reached.
* ``gen_ai_client_operation_duration_seconds`` / ``gen_ai_client_token_usage``: the Runs'
  model calls in the OpenTelemetry GenAI conventions (``swarmkit_operator.genai_metrics``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import (
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from swarmkit_api.run import TokenUsage
from swarmkit_api.spend import MICROS, parse_money

RECONCILES = Counter(
    "swarmkit_reconcile_total", "Reconciles by kind and outcome.", ["kind", "outcome"]
)
RECONCILE_SECONDS = Histogram(
    "swarmkit_reconcile_duration_seconds",
    "Reconcile latency by kind.",
    ["kind"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
API_REQUESTS = Counter(
    "swarmkit_api_requests_total",
    "Kubernetes API requests made by the operator's client.",
    ["verb", "resource", "code"],
)
WRITES_REFUSED = Counter(
    "swarmkit_api_writes_refused_total",
    "Write requests not sent because this replica is not the leader (or its lease lapsed).",
    ["verb", "resource"],
)
LEADER = Gauge("swarmkit_leader", "1 while this replica holds the leader lease, else 0.")
QUEUE_DEPTH = Gauge("swarmkit_workqueue_depth", "Keys waiting in the reconcile work queue.")
RETRIES = Counter("swarmkit_workqueue_retries_total", "Reconciles retried after errors.", ["kind"])
EVENTS = Counter("swarmkit_events_total", "Kubernetes Events posted.", ["type"])
SKILL_LOADS = Counter(
    "swarmkit_skill_loads_total",
    "Agents that loaded the skill (load_skill) in finished Runs.",
    ["namespace", "skill"],
)
SKILL_SCRIPT_RUNS = Counter(
    "swarmkit_skill_script_runs_total",
    "Runs of the skill's bundled scripts in finished Runs.",
    ["namespace", "skill", "outcome"],
)

FUNNEL_GATES = Counter(
    "swarmkit_funnel_gates_total",
    "Funnel approvals opened (AwaitingApproval) and settled (Approved, Rejected, Expired, "
    "RevisionRequested).",
    ["namespace", "funnel", "state"],
)
FUNNEL_ATTEMPTS = Histogram(
    "swarmkit_funnel_gate_attempts",
    "Drafts per gated artifact that reached the approval (1 + retries).",
    ["funnel"],
    buckets=(1, 2, 3, 4, 6, 11),
)

FUNNEL_LAYER_RESULTS = Counter(
    "swarmkit_funnel_layer_results_total",
    "Outcomes of the funnels' automated layers (validate, judge, review) over the drafts "
    "of each approval round.",
    ["namespace", "funnel", "layer", "outcome"],
)
FUNNEL_RETRIES = Counter(
    "swarmkit_funnel_retries_total",
    "Retries the funnels' automated layers asked of the drafting agent.",
    ["namespace", "funnel"],
)

SPEND = Counter(
    "swarmkit_spend_total",
    "Cost of finished Runs by agent and model, in currency units.",
    ["namespace", "agent", "model", "currency"],
)
SPEND_UNKNOWN = Counter(
    "swarmkit_spend_unknown_total",
    "Agent-models of finished Runs whose cost is unknown (the provider has no prices).",
    ["namespace", "agent", "model"],
)
MODEL_TOKENS = Counter(
    "swarmkit_model_tokens_total",
    "Model tokens of finished Runs by agent, model and type.",
    ["namespace", "agent", "model", "type"],
)
EVAL_PASS_RATE = Gauge(
    "swarmkit_eval_pass_rate",
    "Pass rate (0..1) of the latest finished EvalRun of an EvalSet, per side's target and version.",
    ["namespace", "evalset", "target", "version"],
)
EVAL_SCORE = Gauge(
    "swarmkit_eval_score",
    "Weighted mean score (0..1) of the latest finished EvalRun of an EvalSet, per side's "
    "target and version.",
    ["namespace", "evalset", "target", "version"],
)
EVAL_RUNS = Counter(
    "swarmkit_evalruns_total",
    "EvalRuns that reached a verdict, by EvalSet and verdict.",
    ["namespace", "evalset", "verdict"],
)


def record_evaluation(namespace: str, evalset: str, status: dict[str, Any]) -> None:
    """Set the evaluation gauges from a finished EvalRun's status (both sides)."""
    for side in ("candidate", "baseline"):
        summary = status.get(side) or {}
        labels = (namespace, evalset, str(summary.get("target")), str(summary.get("version")))
        if summary.get("passRate") is not None:
            EVAL_PASS_RATE.labels(*labels).set(float(summary["passRate"]))
        if summary.get("score") is not None:
            EVAL_SCORE.labels(*labels).set(float(summary["score"]))


def record_spend(namespace: str, usage: TokenUsage) -> None:
    """Count a finished Run's usage (per agent and model)."""
    for m in usage.models:
        agent, model = m.agent or "", m.model
        tokens = MODEL_TOKENS.labels(namespace, agent, model, "input")
        tokens.inc(m.input_tokens - m.cached_input_tokens)
        MODEL_TOKENS.labels(namespace, agent, model, "cached_input").inc(m.cached_input_tokens)
        MODEL_TOKENS.labels(namespace, agent, model, "output").inc(m.output_tokens)
        if m.cost is None or m.cost_unknown:
            SPEND_UNKNOWN.labels(namespace, agent, model).inc()
        else:
            amount = parse_money(m.cost) / MICROS
            SPEND.labels(namespace, agent, model, m.currency or "").inc(amount)


#: (kind, condition, status) → count; set by the handlers.
ObjectCounts = Callable[[], Iterable[tuple[str, str, str, int]]]


#: The scrape-time gauge of objects by condition (documented with the other metrics).
OBJECTS_NAME = "swarmkit_objects"
OBJECTS_HELP = "Objects by kind and condition."
OBJECTS_LABELS = ("kind", "condition", "status")


class _ObjectsCollector(Collector):
    def __init__(self) -> None:
        self.provider: ObjectCounts | None = None
        self._lock = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(OBJECTS_NAME, OBJECTS_HELP, labels=list(OBJECTS_LABELS))
        with self._lock:
            provider = self.provider
        if provider is not None:
            try:
                for kind, condition, status, count in provider():
                    family.add_metric([kind, condition, status], count)
            except Exception:
                pass
        yield family

    def describe(self) -> list[Any]:
        return []


_OBJECTS = _ObjectsCollector()
REGISTRY.register(_OBJECTS)


def set_object_counts(provider: ObjectCounts | None) -> None:
    """Register the function that counts objects by condition at scrape time."""
    _OBJECTS.provider = provider


_server_started: set[int] = set()


def serve(port: int, addr: str = "0.0.0.0") -> None:
    """Start the metrics HTTP server once per port (0 disables it)."""
    if port and port not in _server_started:
        start_http_server(port, addr=addr)
        _server_started.add(port)
