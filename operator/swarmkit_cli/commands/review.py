"""``kubectl swarmkit review list|show|approve|reject|answer|revise``: what waits on a person.

``list`` shows the Reviews of the namespace (``-A``: all namespaces) with their Run, kind,
state, verdict and who decided; ``show NAME`` the question, the skill and tool, the call's
arguments (secrets scrubbed by the runner), the context and the deadline. ``approve``,
``reject`` and ``answer`` write ``spec.decision`` exactly as the documented ``kubectl
patch`` does, with ``decidedBy`` set to the user the apiserver authenticates you as (a
SelfSubjectReview, what ``kubectl auth whoami`` asks): the admission policy refuses any
other name, a second decision and a decision after the deadline, and the error it gives is
printed as is. ``--as USER`` impersonates, like kubectl's flag. A funnel approval
(:mod:`.review_gate`) is signed instead: ``approve|reject NAME --role ROLE``, or
``revise NAME --role ROLE --text WHAT`` to send it back to the drafting agent, and
``show`` prints its gate report, quorum, revision history and diff.
"""

from __future__ import annotations

import argparse
from typing import Any

from swarmkit_api import GROUP, VERSION
from swarmkit_api.review import decision_of

from .. import review_gate
from ..console import Console
from ..plugin import (
    EXIT_OK,
    CommandError,
    UsageError,
    add_command,
    add_namespace_flag,
    api_reason,
)

PLURAL = "reviews"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "review",
        run,
        help="list, show and decide Reviews (approve, reject, answer)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument(
        "action",
        choices=["list", "show", "approve", "reject", "answer", "revise"],
        help="what to do (revise: funnel approvals only)",
    )
    parser.add_argument("name", nargs="?", help="the Review (not for list)")
    parser.add_argument(
        "--text",
        help="the answer (answer), the revision asked (revise) or a comment (approve, reject)",
    )
    parser.add_argument("--role", help="a funnel approval: the role you sign in")
    parser.add_argument("-A", "--all-namespaces", action="store_true", help="list: every namespace")
    add_namespace_flag(parser)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.action != "list" and not args.name:
        raise UsageError(f"review {args.action} needs the Review's name")
    if args.action == "answer" and not args.text:
        raise UsageError("review answer needs --text with the answer")
    from ..kube import connect

    kube = connect(
        args.kubeconfig,
        args.namespace,
        context=args.context,
        as_user=args.as_user,
        as_group=args.as_group,
    )
    try:
        if args.action == "list":
            return _list(kube, console, args.all_namespaces)
        review = kube.get("Review", args.name)
        if args.action == "show":
            _show(review, console)
            review_gate.show(review, console)
            return EXIT_OK
        if review_gate.gate_of(review) is not None:
            return review_gate.sign(
                kube, console, review, args.action, args.role, args.text, whoami(kube)
            )
        if args.action == "revise":
            raise UsageError(f"review {args.name} is not a funnel approval: nothing to revise")
        return _decide(kube, console, review, args.action, args.text)
    finally:
        kube.close()


def _list(kube: Any, console: Console, everywhere: bool) -> int:
    if everywhere:
        items = kube.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL).get("items", [])
    else:
        items = kube.list("Review")
    rows = []
    for r in sorted(items, key=lambda r: r["metadata"].get("creationTimestamp") or ""):
        request = (r.get("spec") or {}).get("request") or {}
        status = r.get("status") or {}
        decided = decision_of(r)
        row = [
            r["metadata"]["name"],
            (request.get("runRef") or request.get("skillRef") or {}).get("name", ""),
            request.get("kind", ""),
            status.get("state") or "Pending",
            decided.verdict if decided is not None else "",
            decided.decided_by if decided is not None else status.get("decidedBy") or "",
            request.get("deadline") or "",
        ]
        rows.append([r["metadata"]["namespace"], *row] if everywhere else row)
    header = ["NAME", "RUN", "KIND", "STATE", "VERDICT", "DECIDED-BY", "DEADLINE"]
    console.table(["NAMESPACE", *header] if everywhere else header, rows)
    return EXIT_OK


def _show(review: dict[str, Any], console: Console) -> None:
    spec = review.get("spec") or {}
    request = spec.get("request") or {}
    status = review.get("status") or {}
    console.print(f"Review {review['metadata']['name']} ({request.get('kind')})")
    for label, value in (
        ("Run", (request.get("runRef") or {}).get("name")),
        ("Skill", (request.get("skillRef") or {}).get("name")),
        ("Agent", request.get("agent")),
        ("Tool", request.get("tool")),
        ("Remote task", request.get("taskId")),
        ("Deadline", request.get("deadline")),
        ("State", status.get("state") or "Pending"),
    ):
        if value:
            console.print(f"{label + ':':13}{value}")
    console.print(f"Question:    {request.get('question', '')}")
    if request.get("arguments"):
        console.print(f"Arguments:   {request['arguments']}")
    if request.get("context"):
        console.print(f"Context:     {request['context']}")
    decided = decision_of(review)
    if decided is not None:
        when = status.get("decidedAt") or decided.decided_at
        text = f": {decided.text}" if decided.text else ""
        console.print(
            f"Decision:    {decided.verdict} by {decided.decided_by} {when}{text}".rstrip()
        )


def whoami(kube: Any) -> str:
    """The authenticated user name (a SelfSubjectReview, like ``kubectl auth whoami``)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    body = client.V1SelfSubjectReview(
        api_version="authentication.k8s.io/v1", kind="SelfSubjectReview"
    )
    try:
        out = client.AuthenticationV1Api(kube.api_client).create_self_subject_review(body)
    except ApiException as exc:
        raise CommandError(
            f"cannot tell who you are (SelfSubjectReview): {api_reason(exc)}"
        ) from None
    name = out.status.user_info.username if out.status and out.status.user_info else None
    if not name:
        raise CommandError("the apiserver did not say who you are (SelfSubjectReview)")
    return str(name)


def _decide(
    kube: Any, console: Console, review: dict[str, Any], action: str, text: str | None
) -> int:
    from kubernetes.client.exceptions import ApiException

    name = review["metadata"]["name"]
    decision: dict[str, Any] = {
        "verdict": action,
        "decidedBy": whoami(kube),
    }
    if text:
        decision["text"] = text
    try:
        kube.custom.patch_namespaced_custom_object(
            GROUP, VERSION, kube.namespace, PLURAL, name, {"spec": {"decision": decision}}
        )
    except ApiException as exc:
        raise CommandError(f"review {name}: {api_reason(exc)}") from None
    console.print(f"review {name}: {action} by {decision['decidedBy']}")
    return EXIT_OK
