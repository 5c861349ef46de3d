"""``kubectl swarmkit promote --force (topology|agent)/NAME``: promote the candidate version
of a Topology or Agent past its evaluation, for emergencies.

Without ``--force`` it only shows where the promotion stands (active and candidate versions,
the verdict, the regressions). With it, it annotates the object with the candidate version
and your user name; the admission policy ``swarmkit-promote-force`` admits that only for
someone holding the ``promote`` verb on the object (the chart grants it in the ``admin``
role) and only with your own authenticated name, and the operator records who forced it in
``status.promotion.active.forcedBy``, in the ``Promoted`` condition (reason ``Forced``) and
in an Event.
"""

from __future__ import annotations

import argparse
from typing import Any

from swarmkit_api import GROUP, VERSION
from swarmkit_api.promotion import FORCE_PROMOTE_ANNOTATION, FORCE_PROMOTED_BY_ANNOTATION

from ..console import Console
from ..plugin import EXIT_OK, CommandError, UsageError, add_command, add_namespace_flag, api_reason
from . import inbox
from .review import whoami

PLURALS = {
    "topology": "topologies",
    "topologies": "topologies",
    "agent": "agents",
    "agents": "agents",
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "promote",
        run,
        help="show a Topology's or Agent's promotion; --force promotes its candidate",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("target", help="topology/NAME or agent/NAME")
    parser.add_argument(
        "--force",
        action="store_true",
        help="promote the current candidate past its evaluation (audited, admin only)",
    )
    add_namespace_flag(parser)


def _target(text: str) -> tuple[str, str]:
    kind, sep, name = text.partition("/")
    if not sep or kind.lower() not in PLURALS or not name:
        raise UsageError(f"expected topology/NAME or agent/NAME, got {text!r}")
    return PLURALS[kind.lower()], name


def run(args: argparse.Namespace, console: Console) -> int:
    from kubernetes.client.exceptions import ApiException

    plural, name = _target(args.target)
    kube = inbox.connect(args)
    try:
        try:
            obj: dict[str, Any] = kube.custom.get_namespaced_custom_object(
                GROUP, VERSION, kube.namespace, plural, name
            )
        except ApiException as exc:
            raise CommandError(f"{plural} {name}: {api_reason(exc)}") from None
        promotion = (obj.get("status") or {}).get("promotion")
        if promotion is None:
            raise CommandError(f"{plural} {name} has no spec.promotion (or no status yet)")
        active = (promotion.get("active") or {}).get("version", "-")
        candidate = promotion.get("candidate") or {}
        _show(console, active, candidate)
        if not args.force:
            return EXIT_OK
        version = candidate.get("version")
        if not version:
            raise CommandError(f"{plural} {name}: no candidate to promote (active {active})")
        user = whoami(kube)
        patch = {
            "metadata": {
                "annotations": {
                    FORCE_PROMOTE_ANNOTATION: version,
                    FORCE_PROMOTED_BY_ANNOTATION: user,
                }
            }
        }
        try:
            kube.custom.patch_namespaced_custom_object(
                GROUP, VERSION, kube.namespace, plural, name, patch
            )
        except ApiException as exc:
            raise CommandError(f"{plural} {name}: {api_reason(exc)}") from None
    finally:
        kube.close()
    console.print(
        f"{plural} {name}: candidate {version} forced by {user}; the operator promotes it"
    )
    return EXIT_OK


def _show(console: Console, active: str, candidate: dict[str, Any]) -> None:
    rows = [["active", active, "", ""]]
    if candidate:
        regressions = ", ".join(candidate.get("regressions") or ()) or "-"
        rows.append(
            [
                "candidate",
                str(candidate.get("version", "-")),
                str(candidate.get("verdict") or "evaluating"),
                regressions,
            ]
        )
    console.table(["", "version", "verdict", "regressions"], rows)
