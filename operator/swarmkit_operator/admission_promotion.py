"""Who may force a promotion past its evaluation (pure: → manifests).

``kubectl swarmkit promote --force`` sets two annotations on a Topology or Agent: the
candidate version it promotes (``swarmkit.dev/force-promote``) and who asks
(``swarmkit.dev/force-promoted-by``). An annotation is writable by anyone who may ``patch``
the object (the built-in ``edit``), so the ValidatingAdmissionPolicy
``swarmkit-promote-force`` (``admissionregistration.k8s.io/v1``, Kubernetes 1.30+) admits a
request that adds or changes either one only when

* the caller holds the custom verb ``promote`` on that object (``topologies`` or ``agents``
  of group ``swarmkit.dev``, asked of the authorizer: the chart grants it in its ``admin``
  aggregated role only, not in ``edit``), and
* ``force-promoted-by`` is the caller's authenticated user name.

Removing them is always admitted. The operator reads the pair (never a spec field), promotes
the named candidate if it is still the candidate, and says who in ``status.promotion.active.
forcedBy``, the ``Promoted`` condition (reason ``Forced``) and its Event. ``make generate``
writes this to ``deploy/admission/promote-force.yaml`` and into the chart.
"""

from __future__ import annotations

from typing import Any

from swarmkit_api.promotion import (
    FORCE_PROMOTE_ANNOTATION,
    FORCE_PROMOTED_BY_ANNOTATION,
    PROMOTE_VERB,
)

POLICY_NAME = "swarmkit-promote-force"
GROUP = "swarmkit.dev"
RESOURCES = ["topologies", "agents"]
_LABELS = {"app.kubernetes.io/part-of": "swarmkit-operator"}


def _has(obj: str, key: str) -> str:
    return f"(has({obj}.metadata.annotations) && '{key}' in {obj}.metadata.annotations)"


def _same(key: str) -> str:
    """The annotation ``key`` is as it was (absent on both sides, or equal)."""
    now, before = _has("object", key), _has("oldObject", key)
    return (
        f"(request.operation == 'UPDATE' && {now} == {before} && (!{now} || "
        f"object.metadata.annotations['{key}'] == oldObject.metadata.annotations['{key}']))"
    )


#: The request adds or changes a forced promotion.
CHANGED = (
    f"({_has('object', FORCE_PROMOTE_ANNOTATION)} || "
    f"{_has('object', FORCE_PROMOTED_BY_ANNOTATION)}) && "
    f"!({_same(FORCE_PROMOTE_ANNOTATION)} && {_same(FORCE_PROMOTED_BY_ANNOTATION)})"
)
ALLOWED = (
    f"authorizer.group('{GROUP}').resource(request.resource.resource)"
    f".namespace(request.namespace).name(request.name).check('{PROMOTE_VERB}').allowed()"
)
BY_CALLER = (
    f"{_has('object', FORCE_PROMOTE_ANNOTATION)} && "
    f"{_has('object', FORCE_PROMOTED_BY_ANNOTATION)} && "
    f"object.metadata.annotations['{FORCE_PROMOTED_BY_ANNOTATION}'] == request.userInfo.username"
)


def validations() -> list[dict[str, Any]]:
    return [
        {
            "expression": f"!({CHANGED}) || {ALLOWED}",
            "messageExpression": f"'forcing a promotion needs the {PROMOTE_VERB} verb on ' + "
            "request.resource.resource + '.swarmkit.dev ' + request.name + ' (the chart grants "
            "it in the admin role only)'",
            "reason": "Forbidden",
        },
        {
            "expression": f"!({CHANGED}) || ({BY_CALLER})",
            "messageExpression": f"'metadata.annotations[{FORCE_PROMOTED_BY_ANNOTATION}] must "
            f"be your authenticated user name ' + request.userInfo.username + ', set together "
            f"with {FORCE_PROMOTE_ANNOTATION}'",
            "reason": "Forbidden",
        },
    ]


def manifests() -> list[dict[str, Any]]:
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": _LABELS},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": RESOURCES,
                    }
                ]
            },
            "validations": validations(),
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME, "labels": _LABELS},
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
    }
    return [policy, binding]


__all__ = ["POLICY_NAME", "manifests", "validations"]
