"""Funnel approvals in ``kubectl swarmkit review``: the gate report, the quorum, signing.

``show`` of a ``funnel_approval`` Review prints what the automated layers found (drafts,
the judge's score and critique, validation problems, reviewer findings, the artifact) and
the quorum as the signatures leave it: per rule who signed in which role and what is still
missing, the distinct people so far, signatures that do not count and why
(:func:`swarmkit_api.quorum.tally`, the operator's own computation), and, from the second
approval round on, the revision history (round, who asked, in which role, the comment),
the signatures carried over from earlier rounds (``onRevision: reconfirmChanged``) and
the diff against the artifact shown in the previous round. ``approve``, ``reject`` and
``revise`` (``--text`` required: what the drafting agent must change) append your
signature to ``spec.approvals`` in the role ``--role`` names (the admission policy checks
that you hold it by user name or group, that ``decidedBy`` is you and that you did not
create the run), guarded by the Review's resourceVersion so two
people signing at once cannot drop each other's signature (on a conflict the Review is read
again and the signature appended to what it holds then, up to five times).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from swarmkit_api import GROUP, VERSION
from swarmkit_api.funnel import Approval, ApprovalRound
from swarmkit_api.review import FunnelGate

from .console import Console
from .plugin import EXIT_OK, CommandError, UsageError, api_reason

PLURAL = "reviews"


def gate_of(review: dict[str, Any]) -> tuple[FunnelGate, list[Approval]] | None:
    """:meth:`FunnelGate.of` (the operator reads the gate the same way), an unreadable gate
    being an error worth a line."""
    try:
        return FunnelGate.of(review)
    except ValidationError as exc:
        raise CommandError(f"review {review['metadata']['name']}: invalid gate: {exc}") from None


def show(review: dict[str, Any], console: Console) -> None:
    found = gate_of(review)
    if found is None:
        return
    gate, approvals = found
    report = gate.report
    console.print(f"Funnel:      {gate.funnel} (node {report.node or '-'})")
    line = f"Drafts:      {report.attempts}"
    if report.exhausted:
        line += " (retries exhausted: the last critique is attached)"
    console.print(line)
    if report.score is not None:
        console.print(f"Judge score: {report.score:g}")
    if report.critique:
        console.print(f"Critique:    {report.critique}")
    for problem in report.validation:
        console.print(f"Validation:  {problem}")
    for finding in report.findings:
        console.print(f"Finding:     [{finding.severity}] {finding.message}")
    console.print(f"Author:      {gate.author or '(unknown)'}")
    _history(gate.rounds, report.round, gate.approve.on_revision, console)
    result = gate.tally(approvals)
    state = (
        "rejected"
        if result.rejected_by
        else "revision requested"
        if result.revision
        else "approved"
        if result.approved
        else "waiting"
    )
    console.print(f"Quorum:      {state}")
    for rule in result.rules:
        signed = "; ".join(f"{role}: {', '.join(who)}" for role, who in rule.signed.items())
        mark = "ok" if rule.satisfied else "missing"
        console.print(f"  rule {rule.index + 1} ({rule.need}): {mark}; signed {signed or '-'}")
    console.print(
        f"  distinct people: {len(result.approvers)} of at least "
        f"{gate.approve.min_distinct_approvers}"
        + (f" ({', '.join(result.approvers)})" if result.approvers else "")
    )
    for text in result.missing:
        console.print(f"  missing: {text}")
    for text in result.ignored:
        console.print(f"  not counted: {text}")
    for text in result.carried:
        console.print(f"  carried over: {text}")
    if result.rejected_by:
        console.print(f"  rejected by {result.rejected_by}")
    if result.revision:
        console.print(
            f"  revision asked by {result.revision.decided_by} as {result.revision.role}: "
            f"{result.revision.text}"
        )
    if report.diff:
        console.print(f"Diff since round {report.round - 1}:")
        console.print(report.diff.rstrip("\n"))
    elif report.round > 1:
        console.print(f"Diff since round {report.round - 1}: none (the artifact is unchanged)")
    console.print("Artifact:")
    console.print(report.artifact)


def _history(rounds: list[ApprovalRound], current: int, policy: str, console: Console) -> None:
    """Round N of the gate, and each earlier round: who asked for the revision and why."""
    if not rounds:
        return
    console.print(f"Round:       {current} (onRevision: {policy})")
    for past in rounds:
        asked = [a for a in past.approvals if a.verdict == "revise"]
        signed = [f"{a.decided_by} as {a.role}" for a in past.approvals if a.verdict == "approve"]
        for a in asked[:1]:
            console.print(
                f"  round {past.round} ({past.review}): revision asked by {a.decided_by} as "
                f"{a.role}: {a.text}"
            )
        if signed:
            console.print(f"    signed in round {past.round}: {', '.join(signed)}")


#: Times a signature is re-read and re-sent when the Review changed meanwhile.
SIGN_ATTEMPTS = 5


def sign(
    kube: Any,
    console: Console,
    review: dict[str, Any],
    verdict: str,
    role: str | None,
    text: str | None,
    user: str,
) -> int:
    from kubernetes.client.exceptions import ApiException

    found = gate_of(review)
    assert found is not None
    gate, _ = found
    name = review["metadata"]["name"]
    roles = sorted(gate.approve.roles)
    if verdict not in ("approve", "reject", "revise"):
        raise UsageError(f"review {name} is a funnel approval: approve, reject or revise it")
    if verdict == "revise" and not text:
        raise UsageError(f"review revise {name} needs --text: what the drafting agent must change")
    if role is None:
        raise UsageError(
            f"review {name} is a funnel approval: sign in a role (--role {'|'.join(roles)})"
        )
    entry: dict[str, Any] = {"verdict": verdict, "role": role, "decidedBy": user}
    if text:
        entry["text"] = text
    # The resourceVersion guard keeps two people signing at once from dropping each
    # other's signature; a conflict also comes from the operator's own status writes
    # (the quorum it keeps on the Review), so re-read and append to the fresh list.
    for attempt in range(1, SIGN_ATTEMPTS + 1):
        approvals = list((review.get("spec") or {}).get("approvals") or [])
        body = {
            "metadata": {"resourceVersion": review["metadata"]["resourceVersion"]},
            "spec": {"approvals": [*approvals, entry]},
        }
        try:
            kube.custom.patch_namespaced_custom_object(
                GROUP, VERSION, kube.namespace, PLURAL, name, body
            )
            break
        except ApiException as exc:
            if exc.status != 409:
                raise CommandError(f"review {name}: {api_reason(exc)}") from None
            if attempt == SIGN_ATTEMPTS:
                raise CommandError(
                    f"review {name} kept changing while signing ({SIGN_ATTEMPTS} attempts): "
                    "try again"
                ) from None
            review = kube.custom.get_namespaced_custom_object(
                GROUP, VERSION, kube.namespace, PLURAL, name
            )
    console.print(f"review {name}: {verdict} by {user} as {role}")
    return EXIT_OK


__all__ = ["gate_of", "show", "sign"]
