"""The operator's settings, parsed once at start-up: the one module that reads the environment.

Two sources, both read once, before anything is built:

* the configuration file the chart mounts (:class:`OperatorConfig`, :func:`load_config`).
  Script approval lives there and nowhere else: no custom resource can widen it. Changing
  the file (Helm values → ConfigMap, with a checksum annotation on the Deployment) rolls
  the operator, which is what makes a new pin take effect;
* the command line and the process environment (:class:`Settings`, :func:`settings_from`):
  tunables, leader election, the watched namespaces. ``__main__`` parses them and hands the
  result to the composition root through ``kopf.run(memo=...)``; from there every component
  gets what it needs in its constructor. Nothing reads ``os.environ`` after start-up and no
  module reads it at import time (``tests/unit/operator/test_settings.py`` checks that).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_RUNTIME_IMAGE = "ghcr.io/swarmkit-operator/swarmkit-runtime:0.1.0"
CONFIG_ENV = "SWARMKIT_OPERATOR_CONFIG"
LEADER_ELECT_ENV = "SWARMKIT_LEADER_ELECT"
#: Leader election defaults a little shorter than client-go's 15/10/2 s: a SIGKILLed
#: leader's work resumes in under 15 s (the lease duration plus one retry period at worst).
DEFAULT_LEASE_DURATION = 12.0
DEFAULT_RENEW_DEADLINE = 8.0
DEFAULT_RETRY_PERIOD = 2.0
#: Seconds a Run's pod may stay unscheduled or pulling before the Run fails
#: (``builders.run_status`` keeps the same default for the pure derivation).
DEFAULT_POD_START_GRACE_SECONDS = 60.0


class ConfigError(ValueError):
    """The operator configuration file is invalid (names the key)."""


@dataclass(frozen=True)
class AllowedScript:
    skill: str
    path: str
    sha256: str
    namespace: str | None = None

    def matches(self, namespace: str, skill: str, path: str) -> bool:
        return (
            self.skill == skill
            and self.path == path
            and (self.namespace is None or self.namespace == namespace)
        )


@dataclass(frozen=True)
class OperatorConfig:
    allow_script_execution: bool = False
    allowed_scripts: tuple[AllowedScript, ...] = ()
    runtime_image: str = DEFAULT_RUNTIME_IMAGE
    watch_namespaces: tuple[str, ...] = ()
    max_job_recreations: int = 2
    #: Content hashes kept per Skill in the skill library's version history.
    skill_history_limit: int = 10
    extra: dict[str, Any] = field(default_factory=dict)

    def pin_for(self, namespace: str, skill: str, path: str) -> AllowedScript | None:
        for entry in self.allowed_scripts:
            if entry.matches(namespace, skill, path):
                return entry
        return None


def _require(cond: bool, key: str, expected: str) -> None:
    if not cond:
        raise ConfigError(f"operator config: {key}: expected {expected}")


def parse_config(data: dict[str, Any] | None) -> OperatorConfig:
    data = data or {}
    _require(isinstance(data, dict), "<root>", "a mapping")
    security = data.get("security") or {}
    skills = security.get("skills") or {}
    _require(isinstance(skills, dict), "security.skills", "a mapping")
    allow = skills.get("allowScriptExecution", False)
    _require(isinstance(allow, bool), "security.skills.allowScriptExecution", "a boolean")
    entries = []
    for i, raw in enumerate(skills.get("allowed") or []):
        key = f"security.skills.allowed[{i}]"
        _require(isinstance(raw, dict), key, "a mapping with skill, path, sha256")
        for name in ("skill", "path", "sha256"):
            _require(isinstance(raw.get(name), str) and raw[name], f"{key}.{name}", "a string")
        sha = raw["sha256"].lower()
        _require(
            len(sha) == 64 and all(c in "0123456789abcdef" for c in sha),
            f"{key}.sha256",
            "64 hex digits (no unpinned entries)",
        )
        entries.append(AllowedScript(raw["skill"], raw["path"], sha, raw.get("namespace")))
    runtime = data.get("runtime") or {}
    image = runtime.get("image", DEFAULT_RUNTIME_IMAGE)
    _require(isinstance(image, str) and bool(image), "runtime.image", "a non-empty string")
    namespaces = data.get("watchNamespaces") or []
    _require(isinstance(namespaces, list), "watchNamespaces", "a list of namespaces")
    recreations = data.get("maxJobRecreations", 2)
    _require(isinstance(recreations, int) and recreations >= 0, "maxJobRecreations", "an int")
    library = data.get("skillLibrary") or {}
    _require(isinstance(library, dict), "skillLibrary", "a mapping")
    history = library.get("historyLimit", 10)
    _require(
        isinstance(history, int) and not isinstance(history, bool) and 1 <= history <= 100,
        "skillLibrary.historyLimit",
        "an int from 1 to 100",
    )
    return OperatorConfig(
        skill_history_limit=history,
        allow_script_execution=allow,
        allowed_scripts=tuple(entries),
        runtime_image=image,
        watch_namespaces=tuple(str(n) for n in namespaces),
        max_job_recreations=recreations,
    )


def load_config(path: str | os.PathLike[str] | None = None) -> OperatorConfig:
    """Load from ``path``; no file means safe defaults."""
    if not path:
        return OperatorConfig()
    text = Path(path).read_text()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"operator config {path}: not valid YAML: {exc}") from None
    return parse_config(data)


# --- the process's settings (command line + environment) ---------------------------------


def environment() -> dict[str, str]:
    """A copy of the process environment: the only read of ``os.environ`` in the operator
    (``__main__`` and the ``kopf run`` fallback of the composition root call it once)."""
    return dict(os.environ)


@dataclass(frozen=True)
class LeaderElection:
    """Leader election on a Lease (``--leader-elect``); off: one replica that leads."""

    enabled: bool = False
    name: str = "swarmkit-operator"
    #: The Lease's namespace; "" means where the operator runs (:attr:`Settings.pod_namespace`).
    namespace: str = ""
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD


@dataclass(frozen=True)
class RunsSettings:
    """The Runs controller's tunables and its loops' periods."""

    #: Seconds a Run's pod may wait to start (``$SWARMKIT_POD_START_GRACE_SECONDS``).
    pod_start_grace_seconds: float = DEFAULT_POD_START_GRACE_SECONDS
    #: Log each Run's milestones (``$SWARMKIT_RUNS_TRACE``; ``bench/bench_runs.py --trace``).
    trace: bool = False
    #: Seconds between schedule ticks (``$SWARMKIT_SCHEDULE_INTERVAL_SECONDS``).
    schedule_interval: float = 5.0
    #: Seconds between retention sweeps (``$SWARMKIT_RETENTION_SWEEP_SECONDS``).
    retention_sweep_seconds: float = 10.0
    #: First webhook retry delay, doubled per attempt (``$SWARMKIT_WEBHOOK_BACKOFF_SECONDS``).
    webhook_backoff_seconds: float = 2.0
    #: Webhook attempts before a message fails (``$SWARMKIT_WEBHOOK_MAX_ATTEMPTS``).
    webhook_max_attempts: int = 6
    #: The process's ``OTEL_*`` variables: whether and where the operator exports its own
    #: spans of traced Runs (``runs/tracing.py``; the OpenTelemetry SDK's own convention).
    otel: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Settings:
    """Everything the operator is configured with, parsed once (module docstring)."""

    config: OperatorConfig = field(default_factory=OperatorConfig)
    #: Watched namespaces (empty: every namespace).
    namespaces: tuple[str, ...] = ()
    #: Reconcile workers (``$SWARMKIT_WORKERS``).
    workers: int = 16
    #: Seconds an unreferenced render is kept (``$SWARMKIT_GC_GRACE_SECONDS``).
    gc_grace_seconds: float = 10.0
    #: Seconds between full resyncs, 0 for none (``$SWARMKIT_RESYNC_SECONDS``).
    resync_seconds: float = 600.0
    #: Seconds between the skill library's flushes (``$SWARMKIT_LIBRARY_FLUSH_SECONDS``).
    library_flush_seconds: float = 2.0
    #: ``HOST:PORT`` of the read-only web view, "" for none (``--web-view``).
    web_view: str = ""
    #: The web view shows everyone everything (``--web-view-single-user``); else per user.
    web_view_single_user: bool = False
    leader: LeaderElection = field(default_factory=LeaderElection)
    runs: RunsSettings = field(default_factory=RunsSettings)
    #: Seconds the apiserver keeps a watch open (``$SWARMKIT_WATCH_SERVER_TIMEOUT``).
    watch_server_timeout: int = 270
    #: Seconds without a byte before a watch is dropped (``$SWARMKIT_WATCH_CLIENT_TIMEOUT``).
    watch_client_timeout: float = 300.0
    #: Keep kopf's per-event "succeeded" log lines (``$SWARMKIT_LOG_HANDLER_SUCCESS``).
    log_handler_success: bool = False
    #: This process's name in Events and the Lease (``$POD_NAME``, else the host name).
    instance: str = field(default_factory=socket.gethostname)
    #: The namespace the operator runs in (``$POD_NAMESPACE``; "" when unknown).
    pod_namespace: str = ""


def _number(env: Mapping[str, str], name: str, default: float, kind: type = float) -> Any:
    raw = env.get(name, "")
    if not raw.strip():
        return kind(default)
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(f"${name}: expected a number, got {raw!r}") from None
    if value < 0:
        raise ConfigError(f"${name}: expected a number >= 0, got {raw!r}")
    return value


def _flag(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def runs_settings(env: Mapping[str, str]) -> RunsSettings:
    """The Runs controller's tunables from ``env`` (:class:`RunsSettings` names them)."""
    return RunsSettings(
        pod_start_grace_seconds=_number(
            env, "SWARMKIT_POD_START_GRACE_SECONDS", DEFAULT_POD_START_GRACE_SECONDS
        ),
        trace=bool(env.get("SWARMKIT_RUNS_TRACE")),
        schedule_interval=_number(env, "SWARMKIT_SCHEDULE_INTERVAL_SECONDS", 5.0),
        retention_sweep_seconds=_number(env, "SWARMKIT_RETENTION_SWEEP_SECONDS", 10.0),
        webhook_backoff_seconds=_number(env, "SWARMKIT_WEBHOOK_BACKOFF_SECONDS", 2.0),
        webhook_max_attempts=_number(env, "SWARMKIT_WEBHOOK_MAX_ATTEMPTS", 6, int),
        otel=tuple(sorted((k, v) for k, v in env.items() if k.startswith("OTEL_"))),
    )


def leader_election(env: Mapping[str, str]) -> LeaderElection:
    """Leader election from ``env`` alone (the ``kopf run`` fallback; ``__main__`` takes
    the same variables as its flags' defaults)."""
    return LeaderElection(
        enabled=_flag(env, LEADER_ELECT_ENV),
        name=env.get("SWARMKIT_LEASE_NAME") or "swarmkit-operator",
        namespace=env.get("SWARMKIT_LEASE_NAMESPACE", ""),
        lease_duration=_number(env, "SWARMKIT_LEASE_DURATION", DEFAULT_LEASE_DURATION),
        renew_deadline=_number(env, "SWARMKIT_RENEW_DEADLINE", DEFAULT_RENEW_DEADLINE),
        retry_period=_number(env, "SWARMKIT_RETRY_PERIOD", DEFAULT_RETRY_PERIOD),
    )


def settings_from(
    env: Mapping[str, str],
    config: OperatorConfig,
    namespaces: tuple[str, ...] = (),
    leader: LeaderElection | None = None,
    web_view: str | None = None,
    web_view_single_user: bool | None = None,
) -> Settings:
    """The operator's settings: the command line's values (the arguments) over ``env``'s.

    Raises :class:`ConfigError` naming the variable when one is not a number.
    """
    return Settings(
        config=config,
        namespaces=namespaces or config.watch_namespaces,
        workers=_number(env, "SWARMKIT_WORKERS", 16, int),
        gc_grace_seconds=_number(env, "SWARMKIT_GC_GRACE_SECONDS", 10.0),
        resync_seconds=_number(env, "SWARMKIT_RESYNC_SECONDS", 600.0),
        library_flush_seconds=_number(env, "SWARMKIT_LIBRARY_FLUSH_SECONDS", 2.0),
        web_view=env.get("SWARMKIT_WEB_VIEW", "") if web_view is None else web_view,
        web_view_single_user=(
            _flag(env, "SWARMKIT_WEB_VIEW_SINGLE_USER")
            if web_view_single_user is None
            else web_view_single_user
        ),
        leader=leader if leader is not None else leader_election(env),
        runs=runs_settings(env),
        watch_server_timeout=_number(env, "SWARMKIT_WATCH_SERVER_TIMEOUT", 270, int),
        watch_client_timeout=_number(env, "SWARMKIT_WATCH_CLIENT_TIMEOUT", 300.0),
        log_handler_success=bool(env.get("SWARMKIT_LOG_HANDLER_SUCCESS")),
        instance=env.get("POD_NAME") or socket.gethostname(),
        pod_namespace=env.get("POD_NAMESPACE", ""),
    )
