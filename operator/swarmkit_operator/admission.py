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
* a Review created with a decision already in it;
* a Review whose ``swarmkit.dev/created-by`` annotation is not its authenticated creator,
  and a Review labelled as a Run's, a Skill's or a gateway's (``swarmkit.dev/run-uid``,
  ``swarmkit.dev/skill``, ``swarmkit.dev/gateway``) created by anyone but the operator
  (:data:`OPERATOR`; the chart names its own release's account): a gateway asks the
  operator on its pod's log, and its ServiceAccount may not create Reviews; neither the
  annotation nor those labels may change afterwards.

Funnel approvals (``spec.request.gate`` set; people sign by appending to
``spec.approvals``) are checked per signature (approve, reject or revise alike; the CRD
requires a revise's text): one new signature per write, its
``decidedBy`` the caller, the caller holding its ``role`` in the pinned
``gate.approve.roles`` by user name or by one of the request's groups, the caller a person
(not a ServiceAccount: whoever may create its token acts as it), the caller not the
Run's author when ``excludeAuthor``, none on a Review that is Expired, Closed or already
Resumed, and no ``spec.decision`` on such a Review at all (one person cannot stand for a
quorum). The earlier signatures must stay an exact prefix of the new list: nothing
inserted, reordered, replaced or removed (the CRD's transition rule refuses that too), so
the one new signature is always the last element, the one every rule above checks.

``make generate`` writes it to ``deploy/admission/review-decisions.yaml`` (what the tests
and plain-kubectl installs apply) and into the chart; ``make verify`` checks both.
"""

from __future__ import annotations

from typing import Any

from swarmkit_api.review import CREATED_BY_ANNOTATION, ORIGIN_LABELS

from . import mailbox_admission

POLICY_NAME = "swarmkit-review-decisions"
GROUP = "swarmkit.dev"

_NO_DECISION_BEFORE = "!has(oldObject.spec.decision)"
_DECIDING = "has(object.spec.decision) && " + _NO_DECISION_BEFORE


def _validation(expression: str, message_expression: str, reason: str) -> dict[str, Any]:
    return {"expression": expression, "messageExpression": message_expression, "reason": reason}


def variables() -> list[dict[str, str]]:
    """Named CEL expressions the funnel-approval rules share (evaluated lazily)."""
    return [
        {
            "name": "signed",
            "expression": "request.operation == 'UPDATE' && has(oldObject.spec.approvals) ? "
            "size(oldObject.spec.approvals) : 0",
        },
        {
            "name": "signing",
            "expression": "request.operation == 'UPDATE' && has(object.spec.approvals) && "
            "size(object.spec.approvals) > variables.signed",
        },
        {
            "name": "signature",
            "expression": "object.spec.approvals[size(object.spec.approvals) - 1]",
        },
    ]


_GATE = "object.spec.request.gate"
_ROLE = _GATE + ".approve.roles[variables.signature.role]"


def approval_validations() -> list[dict[str, Any]]:
    """The funnel-approval rules (see the module docstring)."""
    return [
        _validation(
            "!has(object.spec.decision) || !has(object.spec.request.gate)",
            "'review ' + object.metadata.name + ' is a funnel approval: sign it in "
            "spec.approvals (kubectl swarmkit review --role), not with spec.decision'",
            "Forbidden",
        ),
        _validation(
            "request.operation != 'CREATE' || !has(object.spec.approvals)",
            "'a Review is created without spec.approvals'",
            "Invalid",
        ),
        _validation(
            "variables.signed == 0 || (has(object.spec.approvals) && "
            "size(object.spec.approvals) >= variables.signed && "
            "object.spec.approvals.slice(0, variables.signed) == oldObject.spec.approvals)",
            "'spec.approvals of review ' + object.metadata.name + ': the ' + "
            "string(variables.signed) + ' earlier signature(s) must stay exactly as they are "
            "(append yours; never insert, reorder, replace or remove one)'",
            "Forbidden",
        ),
        _validation(
            "!variables.signing || size(object.spec.approvals) == variables.signed + 1",
            "'add one signature per write (your own)'",
            "Forbidden",
        ),
        _validation(
            "!variables.signing || has(object.spec.request.gate)",
            "'review ' + object.metadata.name + ' is not a funnel approval: answer it with "
            "spec.decision'",
            "Invalid",
        ),
        _validation(
            "!variables.signing || !has(oldObject.status) || !has(oldObject.status.state) || "
            "!(oldObject.status.state in ['Expired', 'Closed', 'Resumed'])",
            "'review ' + object.metadata.name + ' is ' + oldObject.status.state + "
            "': it takes no more signatures'",
            "Forbidden",
        ),
        _validation(
            "!variables.signing || variables.signature.decidedBy == request.userInfo.username",
            "'spec.approvals[].decidedBy must be your authenticated user name ' + "
            "request.userInfo.username + ', not ' + variables.signature.decidedBy",
            "Forbidden",
        ),
        _validation(
            "!variables.signing || !request.userInfo.username.startsWith('system:serviceaccount:')",
            "'a ServiceAccount does not sign a funnel approval: anyone who may create its "
            "token can act as it; sign as yourself'",
            "Forbidden",
        ),
        _validation(
            "!variables.signing || (variables.signature.role in " + _GATE + ".approve.roles && "
            "((has(" + _ROLE + ".users) && request.userInfo.username in " + _ROLE + ".users) || "
            "(has("
            + _ROLE
            + ".groups) && has(request.userInfo.groups) && "
            + _ROLE
            + ".groups.exists(g, g in request.userInfo.groups))))",
            "request.userInfo.username + ' does not hold role ' + variables.signature.role + "
            "' of funnel ' + " + _GATE + ".funnel + ' (by user name or group)'",
            "Forbidden",
        ),
        _validation(
            "!variables.signing || (has("
            + _GATE
            + ".approve.excludeAuthor) && !"
            + _GATE
            + ".approve.excludeAuthor) || !has("
            + _GATE
            + ".author) || "
            "variables.signature.decidedBy != " + _GATE + ".author",
            "request.userInfo.username + ' created the run: funnel ' + "
            + _GATE
            + ".funnel + ' excludes its author from approving (excludeAuthor)'",
            "Forbidden",
        ),
    ]


#: Who the operator is, as the apiserver authenticates it: the chart's ServiceAccount of
#: the default release (``deploy/admission`` as applied by hand and by the tests); the chart
#: renders its own release's account in its place (:data:`CHART_OPERATOR`).
OPERATOR = "system:serviceaccount:swarmkit-system:swarmkit-operator"
CHART_OPERATOR = (
    "system:serviceaccount:{{ .Release.Namespace }}:"
    "{{ include `swarmkit-operator.serviceAccountName` . }}"
)
_ORIGINS = "[" + ", ".join(f"'{label}'" for label in ORIGIN_LABELS) + "]"


def _entry(field: str, obj: str, key: str) -> str:
    """``obj.metadata.<field>[key]``, '' when absent (CEL)."""
    where = f"{obj}.metadata.{field}"
    return f"(has({where}) && {key} in {where} ? {where}[{key}] : '')"


def origin_variables() -> list[dict[str, str]]:
    return [
        {
            "name": "origin",
            "expression": "has(object.metadata.labels) ? "
            + _ORIGINS
            + ".filter(k, k in object.metadata.labels) : []",
        }
    ]


def origin_validations(operator: str = OPERATOR) -> list[dict[str, Any]]:
    """Who opened a Review (issue 46 items 1 and 5): its ``swarmkit.dev/created-by``
    annotation, when set, is its authenticated creator; a Review labelled as a Run's, a
    Skill's or a gateway's is created by the operator only (a gateway asks the operator on
    its pod's log: its ServiceAccount's token is anyone's who may edit the namespace); and
    neither the annotation nor those labels change afterwards."""
    created_by = "'" + CREATED_BY_ANNOTATION + "'"
    return [
        _validation(
            "request.operation != 'CREATE' || !(has(object.metadata.annotations) && "
            + created_by
            + " in object.metadata.annotations) || object.metadata.annotations["
            + created_by
            + "] == request.userInfo.username",
            "'metadata.annotations[" + CREATED_BY_ANNOTATION + "] must be your authenticated "
            "user name ' + request.userInfo.username",
            "Forbidden",
        ),
        _validation(
            "request.operation != 'CREATE' || size(variables.origin) == 0 || "
            "request.userInfo.username == '" + operator + "'",
            "'a Review labelled ' + variables.origin[0] + '=' + "
            "object.metadata.labels[variables.origin[0]] + ' is opened only by the operator ("
            + operator
            + ") on its behalf, not by ' + request.userInfo.username",
            "Forbidden",
        ),
        _validation(
            "request.operation != 'UPDATE' || ("
            + _ORIGINS
            + ".all(k, "
            + _entry("labels", "object", "k")
            + " == "
            + _entry("labels", "oldObject", "k")
            + ") && "
            + _entry("annotations", "object", created_by)
            + " == "
            + _entry("annotations", "oldObject", created_by)
            + ")",
            "'who opened review ' + object.metadata.name + ' (its labels "
            + ", ".join(ORIGIN_LABELS)
            + " and its annotation "
            + CREATED_BY_ANNOTATION
            + ") cannot be added, changed or removed'",
            "Forbidden",
        ),
    ]


def validations(operator: str = OPERATOR) -> list[dict[str, Any]]:
    """The rules, in the order the apiserver reports them."""
    return [
        *origin_validations(operator),
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
        *approval_validations(),
    ]


def policy(operator: str = OPERATOR) -> dict[str, Any]:
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
            "variables": [*variables(), *origin_variables()],
            "validations": validations(operator),
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


def manifests(operator: str = OPERATOR) -> list[dict[str, Any]]:
    """The policies (``operator``: who the operator is; the chart passes
    :data:`CHART_OPERATOR`). The mailbox acknowledgement policy ships beside it (same file,
    same chart switch)."""
    return [policy(operator), binding(), *mailbox_admission.manifests()]


__all__ = [
    "CHART_OPERATOR",
    "OPERATOR",
    "POLICY_NAME",
    "binding",
    "manifests",
    "policy",
    "validations",
]
