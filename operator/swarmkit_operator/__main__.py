"""``python -m swarmkit_operator``: run the operator.

Equivalent to ``kopf run -m swarmkit_operator.handlers`` with our defaults: JSON logs, a
liveness endpoint, a Prometheus metrics port, standalone (no peering) unless ``--peering``,
and every namespace unless the configuration (``watchNamespaces``) or ``--namespace`` names
some. The configuration file (script approvals, defaults) is ``--config`` or
``$SWARMKIT_OPERATOR_CONFIG``; it is read once at start-up.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import socket
import sys
import urllib.parse
from collections.abc import Sequence

import kopf

from .config import CONFIG_ENV, ConfigError, load_config
from .webview.server import parse_address


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
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
        "--peering",
        default=env("SWARMKIT_PEERING") or None,
        help="kopf peering name: several replicas, one active (default: standalone)",
    )
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
        help="serve the read-only web view (skill library, agents, runs) there; no login "
        "of its own, so keep it on loopback or behind a proxy ($SWARMKIT_WEB_VIEW; "
        "default off)",
    )
    parser.add_argument("--verbose", action="store_true", help="debug logging")
    return parser.parse_args(argv)


def peering_priority() -> int:
    """A distinct priority per replica: kopf pauses every peer when two share the highest
    priority, so replicas derive theirs from the pod uid (the chart sets ``POD_UID``)."""
    identity = os.environ.get("POD_UID") or f"{socket.gethostname()}/{os.getpid()}"
    return int(hashlib.sha256(identity.encode()).hexdigest()[:7], 16)


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


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.config:
        os.environ[CONFIG_ENV] = args.config  # the start-up handler reads it from there
    try:
        config = load_config()
    except (ConfigError, OSError) as exc:
        print(f"swarmkit-operator: {exc}", file=sys.stderr)
        return 2
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
    # A port clash must end start-up with one clear line: kopf would log the bind failure of
    # its health reporter and then linger in shutdown, so check the port before it starts.
    problem = _unbindable(args.liveness)
    if problem:
        print(f"swarmkit-operator: --liveness {args.liveness}: {problem}", file=sys.stderr)
        return 2
    if args.web_view:
        try:
            host, port = parse_address(args.web_view)
        except ValueError as exc:
            print(f"swarmkit-operator: --web-view: {exc}", file=sys.stderr)
            return 2
        shown = f"[{host}]" if ":" in host else host
        problem = _unbindable(f"http://{shown}:{port}/")
        if problem:
            print(f"swarmkit-operator: --web-view {args.web_view}: {problem}", file=sys.stderr)
            return 2
        os.environ["SWARMKIT_WEB_VIEW"] = f"{shown}:{port}"  # the start-up handler serves it
    try:
        metrics.serve(args.metrics_port)
    except OSError as exc:
        print(f"swarmkit-operator: --metrics-port {args.metrics_port}: {exc}", file=sys.stderr)
        return 2
    namespaces = list(args.namespace) or list(config.watch_namespaces)
    if namespaces:  # the start-up handler pre-populates its indexes from these
        os.environ["SWARMKIT_WATCH_NAMESPACES"] = ",".join(namespaces)
    kopf.run(
        standalone=args.peering is None,
        peering_name=args.peering,
        priority=peering_priority(),
        liveness_endpoint=args.liveness or None,
        clusterwide=not namespaces,
        namespaces=namespaces,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
