"""``python -m swarmkit_operator``: run the operator.

Equivalent to ``kopf run -m swarmkit_operator.handlers`` with our defaults: JSON logs, a
liveness endpoint, a Prometheus metrics port, leader election on a Lease with
``--leader-elect`` (several replicas, one writes),
and every namespace unless the configuration (``watchNamespaces``) or ``--namespace`` names
some. The configuration file (script approvals, defaults) is ``--config`` or
``$SWARMKIT_OPERATOR_CONFIG``. Flags, environment and file are parsed once, here, into one
:class:`~swarmkit_operator.config.Settings` that kopf's memo carries to the composition
root; nothing reads the environment after that.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import socket
import sys
import urllib.parse
from collections.abc import Callable, Mapping, Sequence

import kopf

from .config import (
    CONFIG_ENV,
    DEFAULT_LEASE_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    LEADER_ELECT_ENV,
    ConfigError,
    LeaderElection,
    Settings,
    environment,
    load_config,
    settings_from,
)
from .runtime.allocator import freeze_survivors, limit_malloc_arenas
from .runtime.manager import lease_settings
from .webview.server import is_loopback, parse_address


def _lease_timing_flags(parser: argparse.ArgumentParser, env: Callable[[str, str], str]) -> None:
    """The Lease's three timings, each defaulting to its variable."""
    for flag, var, default, text in (
        (
            "--lease-duration",
            "SWARMKIT_LEASE_DURATION",
            DEFAULT_LEASE_DURATION,
            "how long a standby waits for a silent leader before taking the Lease",
        ),
        (
            "--renew-deadline",
            "SWARMKIT_RENEW_DEADLINE",
            DEFAULT_RENEW_DEADLINE,
            "how long the leader keeps writing without renewing the Lease",
        ),
        (
            "--retry-period",
            "SWARMKIT_RETRY_PERIOD",
            DEFAULT_RETRY_PERIOD,
            "how often the leader renews and a standby retries",
        ),
    ):
        parser.add_argument(
            flag,
            type=float,
            default=float(env(var, str(default))),
            metavar="SECONDS",
            help=f"{text} (${var}, default {default:g})",
        )


def parse_args(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> argparse.Namespace:
    """The command line; each flag's default is its environment variable's value."""
    env = (environment() if environ is None else environ).get
    parser = argparse.ArgumentParser(
        prog="swarmkit-operator", description="Reconcile swarmkit.dev resources."
    )
    parser.add_argument(
        "--config", default=env(CONFIG_ENV), help=f"configuration file (${CONFIG_ENV})"
    )
    parser.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="watch only this namespace (repeatable; default: the config's watchNamespaces, "
        "else all namespaces)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=int(env("SWARMKIT_METRICS_PORT", "8080")),
        help="Prometheus metrics port, 0 to disable ($SWARMKIT_METRICS_PORT, default 8080)",
    )
    parser.add_argument(
        "--liveness",
        default=env("SWARMKIT_LIVENESS", "http://0.0.0.0:8081/healthz"),
        help="liveness endpoint URL, '' to disable ($SWARMKIT_LIVENESS)",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=env(LEADER_ELECT_ENV, "").lower() in ("1", "true", "yes", "on"),
        help="elect a leader on a Lease: only the leader writes, other replicas stand by "
        f"(${LEADER_ELECT_ENV}; the chart always sets it; default off: one replica)",
    )
    parser.add_argument(
        "--leader-election-id",
        default=env("SWARMKIT_LEASE_NAME", "swarmkit-operator"),
        help="the Lease's name ($SWARMKIT_LEASE_NAME, default swarmkit-operator)",
    )
    parser.add_argument(
        "--leader-election-namespace",
        default=env("SWARMKIT_LEASE_NAMESPACE", ""),
        help="the Lease's namespace ($SWARMKIT_LEASE_NAMESPACE; default $POD_NAMESPACE, "
        "else the service account's namespace)",
    )
    _lease_timing_flags(parser, env)
    parser.add_argument(
        "--log-format",
        choices=["json", "plain", "full"],
        default=env("SWARMKIT_LOG_FORMAT", "json"),
        help="log format (default json)",
    )
    parser.add_argument(
        "--web-view",
        default=env("SWARMKIT_WEB_VIEW", ""),
        metavar="HOST:PORT",
        help="serve the read-only web view (skill library, agents, runs) there: per user, "
        "on loopback behind an authenticating proxy that names the user "
        "(X-Forwarded-User/-Groups) ($SWARMKIT_WEB_VIEW; default off)",
    )
    parser.add_argument(
        "--web-view-single-user",
        action="store_true",
        default=env("SWARMKIT_WEB_VIEW_SINGLE_USER", "").lower() in ("1", "true", "yes", "on"),
        help="the web view shows whoever reaches it everything the operator sees, on any "
        "address (a single-user install, the demo) ($SWARMKIT_WEB_VIEW_SINGLE_USER)",
    )
    parser.add_argument("--verbose", action="store_true", help="debug logging")
    return parser.parse_args(argv)


def _unbindable(url: str | None) -> str | None:
    """Why the liveness endpoint ``url`` cannot be served, or None when it can (or is off)."""
    if not url:
        return None
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "http" or parsed.port is None:
        return "expected http://HOST:PORT/PATH"
    host = parsed.hostname or "0.0.0.0"
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, parsed.port))
        except OSError as exc:
            return f"cannot listen on {host}:{parsed.port} ({exc.strerror})"
    return None


def _fail(message: str) -> int:
    print(f"swarmkit-operator: {message}", file=sys.stderr)
    return 2


def settings_of(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    """The operator's settings: the flags over the environment over the file's defaults.
    Raises ConfigError or OSError (the file) and ValueError (leader election)."""
    leader = LeaderElection(
        enabled=args.leader_elect,
        name=args.leader_election_id,
        namespace=args.leader_election_namespace,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
    )
    settings = settings_from(
        env,
        load_config(args.config),
        namespaces=tuple(args.namespace),
        leader=leader,
        web_view=args.web_view,
        web_view_single_user=args.web_view_single_user,
    )
    lease_settings(settings)  # refuses unsafe lease settings now, not in the start-up
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    env = environment()
    limit_malloc_arenas(env)  # before the API client's threads exist (runtime/allocator.py)
    args = parse_args(argv, env)
    try:
        settings = settings_of(args, env)
    except (ConfigError, OSError, ValueError) as exc:
        return _fail(str(exc))
    formats = {
        "json": kopf.LogFormat.JSON,
        "plain": kopf.LogFormat.PLAIN,
        "full": kopf.LogFormat.FULL,
    }
    kopf.configure(verbose=args.verbose, log_format=formats[args.log_format])
    logging.getLogger("swarmkit_operator").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    for noisy in ("urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    from . import handlers, metrics  # registers the handlers with kopf

    del handlers
    # Every module is imported: what they made lives as long as the process, and no
    # collection needs to walk it again (runtime/allocator.py).
    freeze_survivors()
    # A port clash must end start-up with one clear line: kopf would log the bind failure of
    # its health reporter and then linger in shutdown, so check the port before it starts.
    problem = _unbindable(args.liveness)
    if problem:
        return _fail(f"--liveness {args.liveness}: {problem}")
    if args.web_view:
        try:
            host, port = parse_address(args.web_view)
        except ValueError as exc:
            return _fail(f"--web-view: {exc}")
        if not settings.web_view_single_user and not is_loopback(host):
            return _fail(
                f"--web-view {args.web_view}: a per-user web view trusts the identity headers "
                "of the proxy in its pod, so it listens on loopback only (127.0.0.1); or "
                "pass --web-view-single-user to show everyone everything"
            )
        shown = f"[{host}]" if ":" in host else host
        problem = _unbindable(f"http://{shown}:{port}/")
        if problem:
            return _fail(f"--web-view {args.web_view}: {problem}")
        settings = dataclasses.replace(settings, web_view=f"{shown}:{port}")
    try:
        metrics.serve(args.metrics_port)
    except OSError as exc:
        return _fail(f"--metrics-port {args.metrics_port}: {exc}")
    # kopf runs standalone in every replica: its peering would pause only its own watches,
    # while the writers are ours; the Lease gates them (docs/design/operator-runtime.md).
    # kopf's memo carries the settings to the composition root (handlers/root.py).
    kopf.run(
        standalone=True,
        liveness_endpoint=args.liveness or None,
        clusterwide=not settings.namespaces,
        namespaces=list(settings.namespaces),
        memo=kopf.Memo(settings=settings),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
