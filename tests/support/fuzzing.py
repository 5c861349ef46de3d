"""The fuzz driver shared by the chaos suite (full size) and the integration suite (a small,
fast profile): post generated specs of one kind into a poison namespace and assert what a
user would notice (issue 47 item 6).

For every generated spec (:mod:`tests.support.crd_strategies`) the apiserver either
refuses it at admission naming a field, or admits it and the operator gives it its
condition within seconds. Reviews and MailboxMessages are the operator's own output: it
watches only the Reviews it labelled and delivers a message only to a webhook, so one a
user creates gets nothing, and for those two kinds the test asserts the rest only.
Meanwhile a canary Skill created in another namespace is
Ready within its usual time, the operator's log shows no traceback loop and the operator
stays alive.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from kubernetes.client.exceptions import ApiException

from swarmkit_api.decoding import loads
from swarmkit_devcluster.testing import Kube, wait_for

from .crd_strategies import fuzz_spec, kinds

GROUP, VERSION = "swarmkit.dev", "v1alpha1"
API = f"{GROUP}/{VERSION}"
#: The canary's usual time to Ready on this machine.
CANARY_SECONDS = 15.0
#: How long every admitted object of one batch may take to get its condition.
CONDITION_SECONDS = 30.0
#: The condition types that say the operator looked at an object of a kind.
OBSERVED = {
    "Run": ("Succeeded",),
    "EvalRun": ("Succeeded",),  # a run of an EvalSet: Succeeded, as a Run
    "SpendQuota": ("Ready", "SelectorUnmatched"),
}
#: Kinds the operator writes and never reconciles for a user (see the module docstring).
NOT_RECONCILED = ("Review", "MailboxMessage")


def named_field(status: int, data: bytes | str) -> str:
    """The field a refusal names (asserting that it names one)."""
    assert status in (400, 413, 422), f"HTTP {status}: {data!r:.400}"
    body = json.loads(data or "{}")
    causes = (body.get("details") or {}).get("causes") or ()
    named = [c.get("field", "") for c in causes if c.get("field")]
    text = str(body.get("message", ""))
    # A cause's field, else the message names it (strict decoding: unknown field "spec[0].a").
    assert named or re.search(r"\bspec\b", text) or status == 413, (
        f"refused naming no field: {text:.400}"
    )
    return named[0] if named else text or "request body"


def post(kube: Kube, namespace: str, doc: dict[str, Any]) -> str:
    """Create ``doc`` as ``kubectl create`` does (unknown fields refused, ``Strict``: with
    the default ``Warn`` a 2,000-key object draws a Warning header per key, past what
    Python's HTTP client reads); the field a refusal named, "" when admitted."""
    body = {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}
    try:
        kube.custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, kinds()[doc["kind"]].plural, body, field_validation="Strict"
        )
    except ApiException as exc:
        return named_field(exc.status, exc.body or "")
    return ""


def read(kube: Kube, namespace: str, plural: str, name: str) -> dict[str, Any] | None:
    """The object as the operator reads it (the client's json.loads fails on a poison)."""
    try:
        answer = kube.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, name, _preload_content=False
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    body: dict[str, Any] = loads(answer.data)
    return body


def observed(kind: str, body: dict[str, Any] | None) -> bool:
    """Whether the operator gave the object the condition it owes it."""
    if body is None:
        return True  # gone (an owner's cascade): nothing left to report on
    if kind in NOT_RECONCILED:
        return True
    status = body.get("status") or {}
    types = OBSERVED.get(kind) or ("Accepted", "Ready")
    return any(c.get("type") in types for c in status.get("conditions") or ())


def tracebacks(log_path: Path) -> int:
    return log_path.read_text(errors="replace").count("Traceback (most recent call")


def canary(kube: Kube, namespace: str, name: str, tail: Callable[[], str]) -> float:
    """Create a Skill in ``namespace``; the seconds it took to be Ready."""
    doc = {
        "apiVersion": API,
        "kind": "Skill",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "description": f"Use when {name} comes up.",
            "category": "capability",
            "instructions": "# canary\n",
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    }
    started = time.monotonic()
    kube.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "skills", doc)

    def ready() -> bool:
        body = read(kube, namespace, "skills", name) or {}
        conds = (body.get("status") or {}).get("conditions") or ()
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)

    wait_for(ready, CANARY_SECONDS, interval=0.1, message=tail)
    return time.monotonic() - started


@dataclass
class FuzzResult:
    """What one kind's batch did."""

    kind: str
    refused: dict[str, int] = field(default_factory=dict)
    admitted: list[str] = field(default_factory=list)
    seconds: float = 0.0
    canary_seconds: float = 0.0

    @property
    def cases(self) -> int:
        return len(self.admitted) + sum(self.refused.values())


def fuzz_kind(
    kube: Kube,
    kind: str,
    namespaces: tuple[str, str],
    examples: int,
    log_path: Path,
    tail: Callable[[], str],
) -> FuzzResult:
    """Post ``examples`` generated ``kind`` specs into ``namespaces[0]`` and assert the
    module docstring's outcomes, with the canary in ``namespaces[1]``."""
    poison_ns, canary_ns = namespaces
    result = FuzzResult(kind)
    started = time.monotonic()
    before = tracebacks(log_path)
    prefix = f"fz-{kind.lower()}-{int(started * 1000) % 10**8}"

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(fuzz_spec(kind))
    def post_one(spec: Any) -> None:
        name = f"{prefix}-{result.cases}"
        doc = {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}
        refused = post(kube, poison_ns, doc)
        if refused:
            where = refused.split(":")[0][:60]
            result.refused[where] = result.refused.get(where, 0) + 1
        else:
            result.admitted.append(name)

    post_one()
    plural = kinds()[kind].plural
    waiting = list(result.admitted)

    def all_observed() -> bool:
        waiting[:] = [n for n in waiting if not observed(kind, read(kube, poison_ns, plural, n))]
        return not waiting

    wait_for(all_observed, CONDITION_SECONDS, interval=0.5, message=lambda: f"{waiting}\n{tail()}")
    result.canary_seconds = canary(kube, canary_ns, f"{prefix}-canary", tail)
    settled = tracebacks(log_path)
    time.sleep(3.0)  # a loop would log more tracebacks now
    assert tracebacks(log_path) == settled, f"a traceback loop:\n{tail()}"
    assert settled - before <= len(result.admitted), tail()
    result.seconds = time.monotonic() - started
    return result


__all__ = ["FuzzResult", "canary", "fuzz_kind", "named_field", "observed", "post", "read"]
