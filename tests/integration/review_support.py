"""Helpers for the human-review end-to-end tests: the admission policy, user roles, people.

People are impersonated through the admin kubeconfig (``kubectl --as=<user>``), so the
real authenticator, RBAC authorizer and ValidatingAdmissionPolicy decide what they may do:

* ``alice`` and ``bob`` hold the chart's ``swarmkit-reviewer`` ClusterRole (RoleBinding);
* ``eve`` holds the built-in ``edit`` role (which the chart's aggregated roles extend).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, temp_namespace, wait_for

from .runs_support import (
    GROUP,
    REPO,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    debug,
    doc,
    finished,
    get,
    reason_is,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
    with_command,
)

ADMISSION = REPO / "deploy" / "admission" / "review-decisions.yaml"
REVIEWERS = ("alice", "bob")
EDITOR = "eve"

#: What the ``ops/deploy`` command of :data:`with_locked_deploy` exits with.
LOCKED = "deploy target locked"
#: An ``apply_examples`` edit: the Workspace gains command pack ``ops`` whose ``deploy``
#: always fails with :data:`LOCKED`.
with_locked_deploy = with_command(
    "ops", "deploy", "Deploy the service.", f"import sys; sys.exit({LOCKED!r})", "write"
)


def kubectl_as(
    cluster: LocalCluster, user: str | None, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """kubectl as ``user`` (impersonated), never raising: the caller looks at the result."""
    who = [f"--as={user}"] if user else []
    return cluster.kubectl(*who, *args, check=False, input=input)


def decide(
    cluster: LocalCluster,
    namespace: str,
    review: str,
    user: str,
    verdict: str,
    text: str | None = None,
    decided_by: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """The documented ``kubectl patch`` a person runs to answer a Review."""
    decision: dict[str, Any] = {"verdict": verdict, "decidedBy": decided_by or user}
    if text is not None:
        decision["text"] = text
    patch = json.dumps({"spec": {"decision": decision}})
    return kubectl_as(
        cluster, user, "-n", namespace, "patch", "review", review, "--type=merge", "-p", patch
    )


def user_roles() -> list[dict[str, Any]]:
    """The chart's user-facing ClusterRoles (view/edit/admin aggregates, swarmkit-reviewer)."""
    from tests.unit.test_chart_render import render

    docs = render({}, release="swarmkit", namespace="swarmkit-system")
    return [
        d
        for d in docs
        if d["kind"] == "ClusterRole"
        and (
            d["metadata"]["name"].startswith("swarmkit-reviewer")
            or any(
                k.startswith("rbac.authorization.k8s.io/aggregate-to-")
                for k in d["metadata"].get("labels", {})
            )
        )
    ]


@pytest.fixture(scope="session")
def review_admission(cluster: LocalCluster, kube: Kube, crds: Any) -> Iterator[None]:
    """The chart's roles and the admission policy, applied and proven effective."""
    roles = user_roles()
    cluster.kubectl(
        "apply", "--server-side", "-f", "-", input="\n---\n".join(json.dumps(d) for d in roles)
    )
    cluster.kubectl("apply", "--server-side", "-f", str(ADMISSION))
    with temp_namespace(kube, "vap-ready") as ns:
        bind_people(cluster, ns)
        attempts = iter(range(1000))

        def forged_is_denied() -> bool:
            # A fresh Review each time: a forged decision admitted before the policy took
            # effect would make every later identical patch a no-op.
            name = f"probe-{next(attempts)}"
            review = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Review",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"request": {"kind": "human_task", "question": "probe"}},
            }
            kube.custom.create_namespaced_custom_object(GROUP, VERSION, ns, "reviews", review)
            res = decide(cluster, ns, name, "alice", "approve", decided_by="mallory")
            return res.returncode != 0 and "decidedBy" in res.stderr

        # Policies (and aggregated roles) take effect asynchronously.
        wait_for(forged_is_denied, 60, interval=1.0, message="the admission policy to take effect")
    yield


def bind_users(cluster: LocalCluster, namespace: str, grants: Iterable[tuple[str, str]]) -> None:
    """RoleBindings ``<user>-<role>`` in ``namespace``: each (user, ClusterRole) of ``grants``."""
    docs = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{user}-{role}", "namespace": namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }
        for user, role in grants
    ]
    cluster.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(d) for d in docs))


def bind_people(cluster: LocalCluster, namespace: str) -> None:
    bind_users(
        cluster, namespace, [(u, "swarmkit-reviewer") for u in REVIEWERS] + [(EDITOR, "edit")]
    )

    def can_decide() -> bool:
        res = kubectl_as(
            cluster, "alice", "auth", "can-i", "patch", "reviews.swarmkit.dev", "-n", namespace
        )
        return res.stdout.strip() == "yes"

    wait_for(can_decide, 30, message="the reviewer role to be aggregated")


def escalating_deploy(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    edit: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> None:
    """The examples, people bound, and a Skill ``deploy`` whose command always fails
    ("target locked") with ``onFailure: escalate_to_human``: a Run that calls it parks
    on a Review. ``edit`` changes the example documents further (e.g. the Workspace)."""
    ops = with_command(
        "ops", "deploy", "Deploy the service.", "import sys; sys.exit('target locked')", "write"
    )
    apply_examples(kube, namespace, edit=lambda doc: edit(ops(doc)) if edit else ops(doc))
    bind_people(cluster, namespace)
    apply(kube, namespace, deploy_skill())


def deploy_skill(**constraints: Any) -> dict[str, Any]:
    """Skill ``deploy``: the ``ops/deploy`` command with ``onFailure: escalate_to_human``
    (and ``constraints`` beside it)."""
    return doc(
        "Skill",
        "deploy",
        {
            "description": "Use when the change is approved and must be deployed.",
            "category": "capability",
            "implementation": {"type": "command", "pack": "ops", "command": "deploy"},
            "constraints": {"onFailure": "escalate_to_human", **constraints},
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    )


def review_of(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    from kubernetes.client.exceptions import ApiException

    try:
        out: dict[str, Any] = kube.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, "reviews", name
        )
        return out
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def parked_review(kube: Kube, namespace: str, run: str, timeout: float = 90) -> dict[str, Any]:
    """The Review the parked Run names in its status, once it exists."""

    def check() -> dict[str, Any] | None:
        body = get(kube, namespace, "Run", run) or {}
        items = (body.get("status") or {}).get("reviewItems") or []
        if not items or not items[0].get("review"):
            return None
        return review_of(kube, namespace, items[0]["review"])

    found: dict[str, Any] = wait_for(check, timeout, message=f"run {run} to open a Review")
    return found


#: The deployer's model turns: call ``deploy`` (it fails and escalates to a person), then
#: finish.
DEPLOY_THEN_DONE: list[dict[str, Any]] = [
    {"toolCalls": [{"name": "deploy", "arguments": {"service": "checkout"}}]},
    {"text": "done"},
]


def park_deploy_run(
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    replay: list[dict[str, Any]] = DEPLOY_THEN_DONE,
) -> dict[str, Any]:
    """After :func:`escalating_deploy`: Agent ``deployer`` (``replay``'s model turns, Skill
    ``deploy``) and Run ``ship``, once it is parked on the Review its failed deploy opened."""
    apply(kube, namespace, agent_with("deployer", replay, skills=["deploy"]))
    wait_ready(kube, namespace, "Agent", "deployer")
    create(kube, namespace, run_manifest("ship", agent="deployer"))
    return wait_run(kube, namespace, "ship", reason_is("AwaitingReview"), operator=operator)


def answer_and_resume(
    cluster: LocalCluster, kube: Kube, namespace: str, run: str, operator: OperatorProcess
) -> dict[str, Any]:
    """Alice answers the Review the parked Run ``run`` opened ("done by hand"); the Run,
    resumed once, once it has succeeded."""
    review = parked_review(kube, namespace, run)
    name = review["metadata"]["name"]
    ok = decide(cluster, namespace, name, "alice", "answer", text="done by hand")
    assert ok.returncode == 0, ok.stderr
    body = wait_run(kube, namespace, run, finished, operator=operator)
    cond = succeeded(body)
    assert cond is not None and cond["reason"] == "Succeeded", debug(kube, namespace, operator)
    assert body["status"]["resumes"] == 1
    return body


def now() -> float:
    return time.monotonic()
