"""Who created a Run, recorded by the apiserver so nobody can forge it (pure: → manifests).

A funnel's ``excludeAuthor`` needs the Run's creator. A spec field or a client-chosen
``managedFields`` manager would be whatever the client claims, so the annotation
``swarmkit.dev/created-by`` is written and guarded by admission policies instead:

* the MutatingAdmissionPolicy ``swarmkit-run-author`` (``admissionregistration.k8s.io/v1``,
  Kubernetes 1.36+) sets it on every Run CREATE to ``request.userInfo.username``,
  overwriting whatever the request carried;
* the ValidatingAdmissionPolicy ``swarmkit-run-author`` (1.30+) refuses a CREATE whose
  annotation is not the caller (on clusters without the mutating policy the creator sets
  it to their own user name) and any UPDATE that adds, changes or removes it.

Mutating policies run before validating ones, so on 1.36+ the creator never has to set
anything. A Run without the annotation (created before the policies were installed) has
no known author: a funnel with ``excludeAuthor`` refuses to open its approval for it (the
run fails with the reason) rather than guess. ``make generate`` writes these to
``deploy/admission/run-author.yaml`` and into the chart (the mutating one only where the
cluster serves the API).
"""

from __future__ import annotations

from typing import Any

POLICY_NAME = "swarmkit-run-author"
ANNOTATION = "swarmkit.dev/created-by"
GROUP = "swarmkit.dev"
_LABELS = {"app.kubernetes.io/part-of": "swarmkit-operator"}
_HAS = f"has(object.metadata.annotations) && '{ANNOTATION}' in object.metadata.annotations"
_HAD = f"has(oldObject.metadata.annotations) && '{ANNOTATION}' in oldObject.metadata.annotations"


def _match(operations: list[str]) -> dict[str, Any]:
    return {
        "resourceRules": [
            {
                "apiGroups": [GROUP],
                "apiVersions": ["*"],
                "operations": operations,
                "resources": ["runs"],
            }
        ]
    }


def validating_policy() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": _LABELS},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": _match(["CREATE", "UPDATE"]),
            "validations": [
                {
                    "expression": f"request.operation != 'CREATE' || !({_HAS}) || "
                    f"object.metadata.annotations['{ANNOTATION}'] == request.userInfo.username",
                    "messageExpression": f"'metadata.annotations[{ANNOTATION}] must be your "
                    "authenticated user name ' + request.userInfo.username",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"request.operation != 'UPDATE' || ({_HAS}) == ({_HAD}) && "
                    f"(!({_HAS}) || object.metadata.annotations['{ANNOTATION}'] == "
                    f"oldObject.metadata.annotations['{ANNOTATION}'])",
                    "messageExpression": f"'metadata.annotations[{ANNOTATION}] records who "
                    "created the run; it cannot be added, changed or removed'",
                    "reason": "Forbidden",
                },
            ],
        },
    }


def mutating_policy() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": _LABELS},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": _match(["CREATE"]),
            # A JSON patch, not an apply configuration: applying one converts the whole
            # object to its typed form first, so a wrong-typed field (timeoutSeconds: "60")
            # failed here with the converter's words before the CRD schema could name it.
            "mutations": [
                {
                    "patchType": "JSONPatch",
                    "jsonPatch": {
                        "expression": "has(object.metadata.annotations) ? "
                        "[JSONPatch{op: 'add', path: '/metadata/annotations/' + "
                        f"jsonpatch.escapeKey('{ANNOTATION}'), "
                        "value: request.userInfo.username}] : "
                        "[JSONPatch{op: 'add', path: '/metadata/annotations', "
                        f"value: {{'{ANNOTATION}': request.userInfo.username}}}}]"
                    },
                }
            ],
        },
    }


def _binding(kind: str, actions: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": POLICY_NAME, "labels": _LABELS},
        "spec": {"policyName": POLICY_NAME, **actions},
    }


def validating_manifests() -> list[dict[str, Any]]:
    return [
        validating_policy(),
        _binding("ValidatingAdmissionPolicyBinding", {"validationActions": ["Deny"]}),
    ]


def mutating_manifests() -> list[dict[str, Any]]:
    return [mutating_policy(), _binding("MutatingAdmissionPolicyBinding", {})]


__all__ = [
    "ANNOTATION",
    "POLICY_NAME",
    "mutating_manifests",
    "mutating_policy",
    "validating_manifests",
    "validating_policy",
]
