"""The admission policy that makes a mailbox acknowledgement unforgeable (pure: → manifests).

A person acknowledges a MailboxMessage by writing ``spec.acknowledgement {by, comment?}``.
Like a Review decision (:mod:`.admission`), the apiserver evaluates this policy on every
create and update of a MailboxMessage and denies:

* an acknowledgement whose ``by`` is not the authenticated user of that very request;
* an item created already acknowledged (the operator creates them; nobody else may).

Who may acknowledge at all is RBAC (the chart's ``swarmkit-mailbox-acknowledger`` role); the
CRD's transition rules keep the item and a written acknowledgement immutable for everyone.
It ships in the same file and chart template as the Review policy.
"""

from __future__ import annotations

from typing import Any

POLICY_NAME = "swarmkit-mailbox-acknowledgements"
GROUP = "swarmkit.dev"
_ACKNOWLEDGING = "has(object.spec.acknowledgement) && !has(oldObject.spec.acknowledgement)"


def validations() -> list[dict[str, Any]]:
    return [
        {
            "expression": "request.operation != 'CREATE' || !has(object.spec.acknowledgement)",
            "messageExpression": "'a MailboxMessage is created unacknowledged; acknowledge it "
            "with an update'",
            "reason": "Invalid",
        },
        {
            "expression": "request.operation != 'UPDATE' || !(" + _ACKNOWLEDGING + ") || "
            "object.spec.acknowledgement.by == request.userInfo.username",
            "messageExpression": "'spec.acknowledgement.by must be your authenticated user "
            "name ' + request.userInfo.username + ', not ' + object.spec.acknowledgement.by",
            "reason": "Forbidden",
        },
    ]


def manifests() -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/part-of": "swarmkit-operator"}
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["mailboxmessages"],
                    }
                ]
            },
            "validations": validations(),
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME, "labels": labels},
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
    }
    return [policy, binding]


__all__ = ["POLICY_NAME", "manifests", "validations"]
