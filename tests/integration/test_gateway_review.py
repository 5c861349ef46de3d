"""A strict call through an Agent's MCP gateway waits for a person, on the real control plane.

The operator runs as a process; the gateway is the real runner in a process-node pod of a
real Deployment, as its own ServiceAccount (the operator's Role: get/watch Reviews; the
gateway asks the operator for each Review on its pod's log and the operator opens it);
the harness is the public ``mcp`` client over streamable HTTP. A reviewer is a user bound
to the chart's ``swarmkit-reviewer`` role, deciding with the documented ``kubectl patch``
through the real admission policy (``review_support``).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for
from tests.support.gateway import mcp_client
from tests.support.mcp_servers import HOST_RUNTIME_IMAGE, free_port, stdio_command

from .review_support import (
    bind_people,
    decide,
    review_admission,  # noqa: F401  (fixture)
    review_of,
)
from .runs_support import GROUP, VERSION, OperatorProcess, apply, doc
from .test_gateway import (
    gateway_audit,
    skill,
    text_of,
    token_secret,
    wait_gateway_up,
)

TOKENS = {"alice": "alice-gw-token-2f9c71", "ci": "ci-gw-token-8d04e3"}
STRICT = {"type": "mcp_tool", "server": "t", "tool": "echo", "permission": "strict"}


def manifests(port: int) -> list[dict[str, Any]]:
    tokens = [
        {"name": name, "secretKeyRef": {"name": "gateway-tokens", "key": name}} for name in TOKENS
    ]
    return [
        doc(
            "Workspace",
            "default",
            {
                "modelProviders": [
                    {
                        "name": "m",
                        "type": "openai",
                        "baseUrl": "http://127.0.0.1:9",
                        "defaultModel": "t",
                    }
                ],
                "mcpServers": [{"id": "t", "transport": "stdio", "command": stdio_command()}],
                "runtime": {"image": HOST_RUNTIME_IMAGE},  # the stdio server is on the host
            },
        ),
        skill("ship", "Use to ship a release (a person approves each call).", STRICT),
        skill(
            "ship-fast",
            "Use to ship now (a person has 6 seconds).",
            STRICT,
            constraints={"reviewTimeoutSeconds": 6, "onReviewTimeout": "fallback"},
        ),
        doc(
            "Agent",
            "coder",
            {
                "workspaceRef": {"name": "default"},
                "model": {"provider": "m", "name": "t"},
                "skills": ["ship", "ship-fast"],
                "tools": ["t.add"],
                "gateway": {
                    "enabled": True,
                    "port": port,
                    "auth": {"tokens": tokens},
                    "reviewTimeoutSeconds": 120,
                },
            },
        ),
    ]


@pytest.fixture
def served(
    kube: Kube,
    cluster: LocalCluster,
    namespace: str,
    operator: OperatorProcess,
    review_admission: None,  # noqa: F811  (the chart's roles and the admission policy)
) -> Iterator[tuple[str, str]]:
    token_secret(kube, namespace)
    bind_people(cluster, namespace)
    port = free_port()
    for manifest in manifests(port):
        apply(kube, namespace, manifest)
    wait_gateway_up(kube, namespace, operator, port)
    yield namespace, f"http://127.0.0.1:{port}/mcp"


def gateway_reviews(kube: Kube, ns: str) -> list[dict[str, Any]]:
    found = kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, ns, "reviews", label_selector="swarmkit.dev/gateway=coder"
    )
    return list(found.get("items") or [])


async def opened_review(kube: Kube, ns: str, tool: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        return next(
            (r for r in gateway_reviews(kube, ns) if r["spec"]["request"].get("tool") == tool),
            None,
        )

    found: dict[str, Any] = await asyncio.to_thread(
        wait_for, check, 60, message=lambda: json.dumps(gateway_audit(kube, ns))[-3000:]
    )
    return found


def audited(kube: Kube, ns: str, event: str, review: str) -> list[dict[str, Any]]:
    return [e for e in gateway_audit(kube, ns) if e["event"] == event and e.get("review") == review]


async def test_a_strict_call_waits_for_a_reviewer_and_runs_once_approved(
    kube: Kube, cluster: LocalCluster, served: tuple[str, str], operator: OperatorProcess
) -> None:
    ns, url = served
    async with mcp_client(url, TOKENS["alice"]) as client:
        call = asyncio.create_task(client.call_tool("ship", {"text": "release 1.4.2"}))
        review = await opened_review(kube, ns, "ship")
        name = review["metadata"]["name"]
        request = review["spec"]["request"]
        assert request["kind"] == "approval" and "strict" in request["question"]
        assert "runRef" not in request and json.loads(request["arguments"]) == {
            "text": "release 1.4.2"
        }
        session = request["gatewaySession"]
        assert (session["agent"], session["identity"]) == ("coder", "alice")
        assert review["metadata"]["ownerReferences"][0]["kind"] == "Agent"
        # The operator opened it, on the gateway's behalf (issue 46 item 5).
        assert review["metadata"]["annotations"]["swarmkit.dev/created-by"] == (
            "system:serviceaccount:swarmkit-system:swarmkit-operator"
        )
        assert not call.done()

        # The waiting call blocks nothing else: another session is served meanwhile.
        async with mcp_client(url, TOKENS["ci"]) as other:
            assert text_of(await other.call_tool("t.add", {"a": 40, "b": 2})) == "42"
        assert not call.done()

        started = time.monotonic()
        res = await asyncio.to_thread(decide, cluster, ns, name, "bob", "approve")
        patched = time.monotonic()
        assert res.returncode == 0, res.stderr
        result = await asyncio.wait_for(call, 30)
        returned = time.monotonic()
    print(
        f"\napprove: patch started → call returned {returned - started:.3f}s; "
        f"kubectl patch returned → call returned {returned - patched:+.3f}s"
    )
    assert not result.is_error, text_of(result)
    assert text_of(result) == "release 1.4.2"

    def decided_lines() -> list[dict[str, Any]] | None:
        return audited(kube, ns, "review.decided", name) or None

    [line] = wait_for(decided_lines, timeout=30)
    [asked] = audited(kube, ns, "review.requested", name)
    assert (line["verdict"], line["decided_by"], line["identity"]) == ("approve", "bob", "alice")
    assert line["correlation_id"] == asked["correlation_id"] == session["correlationId"]
    assert review["metadata"]["labels"]["swarmkit.dev/correlation-id"] == session["correlationId"]
    calls = [
        e
        for e in gateway_audit(kube, ns)
        if e["event"] == "tool.call" and e.get("tool") == "ship" and e.get("outcome") == "ok"
    ]
    assert calls and calls[0]["correlation_id"] == session["correlationId"]

    def recorded() -> dict[str, Any] | None:
        status = (review_of(kube, ns, name) or {}).get("status") or {}
        return status if status.get("state") == "Decided" else None

    status = wait_for(recorded, timeout=30, message=lambda: operator.tail())
    assert (status["verdict"], status["decidedBy"]) == ("approve", "bob")


async def test_a_rejected_call_is_a_tool_error_with_the_reviewers_reason(
    kube: Kube, cluster: LocalCluster, served: tuple[str, str]
) -> None:
    ns, url = served
    secret_arg = f"release with {TOKENS['ci']}"
    async with mcp_client(url, TOKENS["alice"]) as client:
        call = asyncio.create_task(client.call_tool("ship", {"text": secret_arg}))
        review = await opened_review(kube, ns, "ship")
        name = review["metadata"]["name"]
        # A secret the gateway knows never lands in the Review.
        assert not any(token in json.dumps(review) for token in TOKENS.values())
        forged = await asyncio.to_thread(
            decide, cluster, ns, name, "eve", "approve"
        )  # an editor is no reviewer
        assert forged.returncode != 0
        res = await asyncio.to_thread(
            decide, cluster, ns, name, "alice", "reject", "not during the release freeze"
        )
        assert res.returncode == 0, res.stderr
        result = await asyncio.wait_for(call, 30)
        # The session goes on after the rejection.
        assert text_of(await client.call_tool("t.add", {"a": 1, "b": 2})) == "3"

    assert result.is_error
    assert "ApprovalRejected" in text_of(result)
    assert "reject by alice: not during the release freeze" in text_of(result)

    def refused() -> list[dict[str, Any]] | None:
        lines = gateway_audit(kube, ns)
        found = [e for e in lines if e["event"] == "tool.refused" and e["tool"] == "ship"]
        return lines if found else None

    lines = wait_for(refused, timeout=30)
    [line] = [e for e in lines if e["event"] == "review.decided" and e.get("review") == name]
    assert (line["verdict"], line["decided_by"]) == ("reject", "alice")
    [refusal] = [e for e in lines if e["event"] == "tool.refused" and e["tool"] == "ship"]
    assert refusal["reason"] == "ApprovalRejected"
    assert refusal["correlation_id"] == line["correlation_id"]
    assert not any(token in json.dumps(lines) for token in TOKENS.values())


async def test_no_decision_in_time_fails_the_call_and_expires_the_review(
    kube: Kube, cluster: LocalCluster, served: tuple[str, str], operator: OperatorProcess
) -> None:
    ns, url = served
    async with mcp_client(url, TOKENS["alice"]) as client:
        started = time.monotonic()
        result = await client.call_tool("ship-fast", {"text": "now"})
        waited = time.monotonic() - started
    # The skill's reviewTimeoutSeconds (6) caps the gateway's 120 s wait.
    assert 5.0 <= waited < 30, waited
    assert result.is_error and "ReviewTimedOut" in text_of(result)
    [review] = [r for r in gateway_reviews(kube, ns) if r["spec"]["request"]["tool"] == "ship-fast"]
    name = review["metadata"]["name"]

    def expired() -> bool:
        return ((review_of(kube, ns, name) or {}).get("status") or {}).get("state") == "Expired"

    wait_for(expired, timeout=30, message=lambda: operator.tail())
    late = decide(cluster, ns, name, "bob", "approve")
    assert late.returncode != 0 and "expired" in late.stderr


def _as_token(
    cluster: LocalCluster, token: str, ns: str, doc: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl(
        "--kubeconfig=/dev/null", f"--server={cluster.server}", "--insecure-skip-tls-verify",
        f"--token={token}", "-n", ns, "create", "-f", "-", input=json.dumps(doc), check=False,
    )  # fmt: skip


def test_an_editor_minting_the_gateways_token_cannot_open_a_review(
    kube: Kube, cluster: LocalCluster, served: tuple[str, str]
) -> None:
    """Issue 46 item 5, as the adversary: eve (Kubernetes' built-in ``edit``) enables a
    gateway and mints its ServiceAccount's token, which ``edit`` allows. That account may
    not create a Review at all (the operator opens a gateway's Reviews, asked on its pod's
    log); an account an admin did allow to create Reviews, and a person allowed to, are
    refused by the admission policy: only the operator opens a Review labelled as a
    gateway's. The gateway's own path works (the other tests of this module)."""
    ns, _ = served
    review = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Review",
        "metadata": {"name": "forged", "labels": {"swarmkit.dev/gateway": "coder"}},
        "spec": {"request": {"kind": "approval", "question": "Approve deploy of checkout?"}},
    }
    minted = cluster.kubectl("--as=eve", "-n", ns, "create", "token", "gw-coder", check=False)
    assert minted.returncode == 0, minted.stderr
    as_gateway = _as_token(cluster, minted.stdout.strip(), ns, review)
    assert as_gateway.returncode != 0
    assert (
        f'User "system:serviceaccount:{ns}:gw-coder" cannot create resource "reviews"'
        in as_gateway.stderr
    ), as_gateway.stderr
    assert not gateway_reviews(kube, ns) or all(
        r["metadata"]["name"] != "forged" for r in gateway_reviews(kube, ns)
    )
    # eve herself has no verb on Reviews
    as_eve = cluster.kubectl(
        "--as=eve", "-n", ns, "create", "-f", "-", input=json.dumps(review), check=False
    )
    assert as_eve.returncode != 0 and 'User "eve" cannot create resource "reviews"' in as_eve.stderr
    # An account an admin let create Reviews, minted by eve: the admission policy refuses.
    other = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "gw-other"}}
    cluster.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(other))
    cluster.kubectl(
        "-n", ns, "create", "role", "gw-other-reviews", "--verb=create",
        "--resource=reviews.swarmkit.dev",
    )  # fmt: skip
    cluster.kubectl(
        "-n", ns, "create", "rolebinding", "gw-other-create", "--role=gw-other-reviews",
        "--serviceaccount", f"{ns}:gw-other",
    )  # fmt: skip
    minted = cluster.kubectl("--as=eve", "-n", ns, "create", "token", "gw-other", check=False)
    assert minted.returncode == 0, minted.stderr
    operator = "system:serviceaccount:swarmkit-system:swarmkit-operator"
    refusal = (
        "a Review labelled swarmkit.dev/gateway=coder is opened only by the operator "
        f"({operator}) on its behalf, not by "
    )

    def refused_as_other() -> subprocess.CompletedProcess[str] | None:
        res = _as_token(cluster, minted.stdout.strip(), ns, review)
        return res if "cannot create resource" not in res.stderr else None  # RBAC settling

    as_other = wait_for(refused_as_other, 30, message="the Role binding to take effect")
    assert as_other.returncode != 0
    assert refusal + f"system:serviceaccount:{ns}:gw-other" in as_other.stderr, as_other.stderr
    # A person allowed to create Reviews (the cluster admin) is refused the same way.
    me = cluster.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").stdout
    as_person = cluster.kubectl(
        "-n", ns, "create", "-f", "-", input=json.dumps(review), check=False
    )
    assert as_person.returncode != 0
    assert refusal + me in as_person.stderr, as_person.stderr
