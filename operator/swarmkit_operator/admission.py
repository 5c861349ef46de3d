"""The admission policy that makes a Review decision unforgeable (pure: → manifest dicts).

A person answers a Review by writing ``spec.decision {verdict, text, decidedBy}``. The
apiserver evaluates this ValidatingAdmissionPolicy on every create and update of a Review
(not on ``reviews/status``, which only the operator may write) and denies:

* a decision whose ``decidedBy`` is not the authenticated user of that very request
  (``request.userInfo.username``): who decided cannot be self-declared;
* a second decision, or a change to the first (the CRD's CEL transition rules refuse that
  too, for everyone);
* a decision on a Review the operator marked ``Expired`` (its deadline passed; the run has
  taken its failure path) or ``Closed`` (its run was cancelled while it waited);
* a Review created with a decision already in it.

``make generate`` writes it to ``deploy/admission/review-decisions.yaml`` (what the tests
and plain-kubectl installs apply) and into the chart; ``make verify`` checks both.
"""

from __future__ import annotations

from typing import Any

from . import mailbox_admission

POLICY_NAME = "swarmkit-review-decisions"
GROUP = "swarmkit.dev"

_NO_DECISION_BEFORE = "!has(oldObject.spec.decision)"
_DECIDING = "has(object.spec.decision) && " + _NO_DECISION_BEFORE


def _validation(expression: str, message_expression: str, reason: str) -> dict[str, Any]:
    return {"expression": expression, "messageExpression": message_expression, "reason": reason}


def validations() -> list[dict[str, Any]]:
    """The rules, in the order the apiserver reports them."""
    return [
        _validation(
            "request.operation != 'CREATE' || !has(object.spec.decision)",
            "'a Review is created without spec.decision; decide it with an update'",
            "Invalid",
        ),
        _validation(
            "request.operation != 'UPDATE' || !has(oldObject.spec.decision) || "
            "(has(object.spec.decision) && object.spec.decision == oldObject.spec.decision)",
            "'review ' + object.metadata.name + ' is already decided (' + "
            "oldObject.spec.decision.verdict + ' by ' + oldObject.spec.decision.decidedBy + "
            "'); a decision is final'",
            "Forbidden",
        ),
        _validation(
            "request.operation != 'UPDATE' || !(" + _DECIDING + ") || "
            "!has(oldObject.status) || !has(oldObject.status.state) || "
            "!(oldObject.status.state in ['Expired', 'Closed'])",
            "'review ' + object.metadata.name + (oldObject.status.state == 'Expired' ? "
            "' expired: its deadline passed and the run already took its failure path' : "
            "' is closed: its run ended without it (cancelled)')",
            "Forbidden",
        ),
        _validation(
            "request.operation != 'UPDATE' || !(" + _DECIDING + ") || "
            "object.spec.decision.decidedBy == request.userInfo.username",
            "'spec.decision.decidedBy must be your authenticated user name ' + "
            "request.userInfo.username + ', not ' + object.spec.decision.decidedBy",
            "Forbidden",
        ),
    ]


def policy() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {
            "name": POLICY_NAME,
            "labels": {"app.kubernetes.io/part-of": "swarmkit-operator"},
        },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["reviews"],
                    }
                ]
            },
            "validations": validations(),
        },
    }


def binding() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {
            "name": POLICY_NAME,
            "labels": {"app.kubernetes.io/part-of": "swarmkit-operator"},
        },
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
    }


def manifests() -> list[dict[str, Any]]:
    # The mailbox acknowledgement policy ships beside it (same file, same chart switch).
    return [policy(), binding(), *mailbox_admission.manifests()]


__all__ = ["POLICY_NAME", "binding", "manifests", "policy", "validations"]
