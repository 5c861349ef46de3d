"""SpendQuota reservations for Runs: reserve before the Job, settle at the end, refresh.

Only the leader runs any of this (the Runs controller and the loop below start in the
leader). Every quota write is a merge patch of ``status`` that carries the quota's
``metadata.resourceVersion``: the apiserver refuses it (409) when anything changed the quota
since it was read, and the write is recomputed from a fresh read. So concurrent Runs (and a
second operator process during a leader handover) never reserve more than the limit.

* :func:`covering` and :func:`reserve_all` (:mod:`.budget` calls them before the bundle
  and Job are created): the Run's cap (:func:`run_cap`) is
  reserved on every quota that covers it, its names recorded in the Run's
  ``status.spendReservations`` first (so whatever happens next is found again). A quota that
  cannot cover it releases what this Run reserved elsewhere and, by its ``onExhausted``,
  the Run waits (``Succeeded=Unknown BudgetExhausted``, rechecked every few seconds and
  when another Run settles) or fails.
* :func:`settle` (when the Run's verdict is final): its reservation becomes what it spent.
* :func:`refresh` (a :class:`~swarmkit_operator.runtime.Periodic` pass of the leader,
  every :data:`REFRESH_SECONDS`): every quota's status follows the clock (the window
  turns), drops reservations of Runs (and EvalRuns) that no longer exist, says when its
  selector matches nothing, and posts a Warning Event when use reaches ``warningPercent``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from swarmkit_api.bundle import RunResult
from swarmkit_api.conditions import (
    BUDGET_WARNING,
    READY,
    REASON_BUDGET_EXHAUSTED,
    REASON_BUDGET_HOLD,
    REASON_INVALID,
    REASON_MATCHED,
    REASON_NO_MATCH,
    REASON_VALIDATION_FAILED,
    SELECTOR_UNMATCHED,
)
from swarmkit_api.resources import GROUP, VERSION, field_errors
from swarmkit_api.run import RunSpec
from swarmkit_api.spend import SpendQuotaSpec, parse_money
from swarmkit_api.workspace import WorkspaceSpec

from .. import k8s
from ..builders import Verdict as Condition
from ..builders import errors_message
from ..builders import run_status as rs
from ..builders import spend as quota
from ..conditions import get_condition, set_condition
from . import passes
from .model import RunView

log = logging.getLogger("swarmkit_operator.spend")

PLURAL = "spendquotas"
MANAGER = "swarmkit-spend"
#: How often a Run waiting on a quota looks again (it is also kicked when a Run settles).
BUDGET_RECHECK_SECONDS = 3.0
#: How often every quota's status follows the clock and the namespace.
REFRESH_SECONDS = 10.0
#: Conflicting writes (409) retried before the reconcile fails (and is retried itself).
CONFLICT_RETRIES = 20


#: The clock of windows and entries (a test injects its own).
def _utcnow() -> datetime:
    return datetime.now(UTC)


clock: Callable[[], datetime] = _utcnow


def _spec(doc: Mapping[str, Any]) -> SpendQuotaSpec | None:
    try:
        return SpendQuotaSpec.model_validate(doc.get("spec") or {})
    except ValidationError:
        return None  # the CRD's schema admits nothing else; an old object is skipped


async def _list(namespace: str | None) -> list[dict[str, Any]]:
    return await k8s.list_custom(PLURAL, namespace)


async def _write(doc: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Merge-patch ``status`` guarded by the read resourceVersion; False on a conflict."""
    meta = doc["metadata"]
    written = await k8s.patch_status_guarded(
        PLURAL, meta["namespace"], meta["name"], meta["resourceVersion"], status, MANAGER
    )
    if not written:
        return False
    await _warn_on_threshold(doc, status)
    return True


async def _warn_on_threshold(doc: Mapping[str, Any], status: Mapping[str, Any]) -> None:
    before = get_condition((doc.get("status") or {}).get("conditions"), BUDGET_WARNING)
    after = get_condition(status.get("conditions"), BUDGET_WARNING)
    if after is None or after.get("status") != "True":
        return
    if before is not None and before.get("status") == "True":
        return
    meta = doc["metadata"]
    involved = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SpendQuota",
        "name": meta["name"],
        "namespace": meta["namespace"],
        "uid": meta.get("uid", ""),
    }
    try:
        await k8s.post_event(involved, "Warning", str(after["reason"]), str(after["message"]))
    except Exception as exc:  # an Event is informative; the write it reports is done
        log.warning("SpendQuota %s: cannot post the Warning Event: %s", meta["name"], exc)


#: Quotas as :func:`covering` just listed them: the first reservation attempt starts from
#: this copy instead of reading the quota again. Only a hint: a stale copy makes the
#: guarded write fail with 409, and the next attempt reads the quota.
_listed: dict[tuple[str, str], dict[str, Any]] = {}


async def _update(
    namespace: str,
    name: str,
    change: Callable[[SpendQuotaSpec, list[dict[str, Any]]], Any],
    hint: dict[str, Any] | None = None,
) -> Any:
    """Read quota ``name`` (first from ``hint``), apply ``change`` (returns (result, new
    entries or None)), write guarded by resourceVersion; repeat on a conflict with a fresh
    read. Returns the change's result."""
    for _ in range(CONFLICT_RETRIES):
        doc = hint or await k8s.get_custom(PLURAL, namespace, name)
        hint = None
        if doc is None:
            return None
        spec = _spec(doc)
        if spec is None:
            return None
        status = doc.get("status") or {}
        result, entries = change(spec, list(status.get("entries") or []))
        if entries is None:
            return result
        fields = quota.summary(
            spec,
            entries,
            clock(),
            status.get("conditions"),
            int(doc["metadata"].get("generation") or 0),
        )
        if await _write(doc, fields):
            return result
    raise RuntimeError(f"SpendQuota {namespace}/{name}: {CONFLICT_RETRIES} conflicting writes")


async def _target_labels(namespace: str, spec: RunSpec) -> dict[str, str]:
    plural, ref = (
        ("topologies", spec.topology_ref) if spec.topology_ref else ("agents", spec.agent_ref)
    )
    if ref is None:
        return {}
    doc = await k8s.get_custom(plural, namespace, ref.name)
    return dict(((doc or {}).get("metadata") or {}).get("labels") or {})


@dataclass(frozen=True)
class Refusal:
    """Why a Run cannot start now, as the verdict to write (and when to look again)."""

    verdict: rs.Verdict
    recheck: float | None = None
    #: onExhausted hold: the quota that holds the Run (a person may let it start).
    hold: str | None = None
    message: str = ""


async def covering(namespace: str, spec: RunSpec) -> list[str]:
    """Names of the quotas that cover a Run of ``spec`` (sorted)."""
    quotas = [(q, s) for q in await _list(namespace) if (s := _spec(q)) is not None]
    if not quotas:
        return []
    for q, _s in quotas:
        _listed[(namespace, q["metadata"]["name"])] = q
    labels = await _target_labels(namespace, spec) if any(s.selector for _, s in quotas) else {}
    return sorted(q["metadata"]["name"] for q, s in quotas if quota.covers(s, labels))


async def reserve_all(
    run: RunView, spec: RunSpec, workspace: WorkspaceSpec, names: list[str], held: bool = False
) -> Refusal | None:
    """Reserve the Run's cap on quotas ``names``; a refusal releases what it reserved.

    ``held``: a person cleared the Run's hold: it is reserved past the limit (recorded as
    ``held`` in the quota's entry)."""
    cap = quota.run_cap(spec, workspace)
    return await reserve_cap(run.namespace, names, run.name, run.uid, cap, held)


async def reserve_cap(
    namespace: str, names: list[str], who: str, uid: str, cap: quota.Cap, held: bool = False
) -> Refusal | None:
    """Reserve ``cap`` for ``who`` (entry uid ``uid``: a Run, or an EvalRun's whole
    evaluation) on quotas ``names``; a refusal releases what it reserved."""
    now = clock()
    for name in names:

        def reserve(s: SpendQuotaSpec, entries: list[dict[str, Any]], name: str = name) -> Any:
            decision = quota.reserve(name, s, entries, who, uid, cap, now, held)
            return (decision, s), decision.entries

        hint = _listed.pop((namespace, name), None)
        result = await _update(namespace, name, reserve, hint)
        if result is None:
            continue  # deleted meanwhile: it covers nothing any more
        decision, qspec = result
        if decision.fits:
            continue
        await release(namespace, names, uid)
        if decision.invalid:
            return Refusal(rs.final(REASON_VALIDATION_FAILED, decision.message))
        if qspec.on_exhausted == "fail":
            return Refusal(rs.final(REASON_BUDGET_EXHAUSTED, decision.message))
        if qspec.on_exhausted == "hold":
            held_verdict = rs.Verdict(
                phase="Pending", status="Unknown", reason=REASON_BUDGET_HOLD, message=""
            )
            return Refusal(held_verdict, BUDGET_RECHECK_SECONDS, name, decision.message)
        waiting = rs.Verdict(
            phase="Pending",
            status="Unknown",
            reason=REASON_BUDGET_EXHAUSTED,
            message=f"{decision.message}; waits until it fits",
        )
        return Refusal(waiting, BUDGET_RECHECK_SECONDS)
    return None


async def reservation_of(namespace: str, names: list[str], who: str) -> str | None:
    """The uid of ``who``'s live reservation (an EvalRun's up-front one, under which the
    case Runs it proves it created start instead of reserving their own) when every quota
    of ``names`` holds it; else None. Only the operator writes a quota's entries, so the
    uid is the EvalRun's own, whatever a Run's label says."""
    holders: set[str] = set()
    for name in names:
        doc = _listed.get((namespace, name)) or await k8s.get_custom(PLURAL, namespace, name)
        entries = ((doc or {}).get("status") or {}).get("entries") or []
        found = {
            str(e.get("uid"))
            for e in entries
            if e.get("run") == who and e.get("state") == "reserved" and e.get("uid")
        }
        if not found:
            return None
        holders = found if not holders else holders & found
    return next(iter(holders)) if len(holders) == 1 else None


async def release(namespace: str, names: list[str], uid: str) -> None:
    """Drop Run ``uid``'s reservations (not its spend) from quotas ``names``."""
    for name in names:

        def drop(_s: SpendQuotaSpec, entries: list[dict[str, Any]]) -> Any:
            kept = [e for e in entries if not (e.get("uid") == uid and e["state"] == "reserved")]
            return None, (kept if len(kept) != len(entries) else None)

        await _update(namespace, name, drop)


async def settle(run: RunView, result: RunResult | None) -> None:
    """Turn the ended Run's reservations into its actual spend (idempotent)."""
    names = list(run.status.get("spendReservations") or [])
    usage = result.usage if result is not None else None
    cost = None
    tokens = usage.input_tokens + usage.output_tokens if usage is not None else None
    if usage is not None and usage.cost is not None and not usage.cost_unknown:
        cost = parse_money(usage.cost)
    elif usage is not None and not usage.cost_unknown and not usage.models and tokens == 0:
        cost = 0  # the runner reported no model call at all (e.g. an invalid bundle)
    await settle_spent(run.namespace, names, run.uid, cost, tokens)


async def settle_spent(
    namespace: str, names: list[str], uid: str, cost: int | None, tokens: int | None
) -> None:
    """Turn ``uid``'s reservations on quotas ``names`` into what it spent (idempotent; an
    unknown cost or token count keeps the reserved one)."""
    for name in names:

        def spend(s: SpendQuotaSpec, entries: list[dict[str, Any]]) -> Any:
            return None, quota.settle(s, entries, uid, cost, tokens, clock())

        await _update(namespace, name, spend)


async def refresh(namespaces: Sequence[str], exists: Callable[[str], bool]) -> None:
    """One pass over every quota of ``namespaces`` (none: all; see the module docstring).

    A quota that fails is that quota's problem: it is logged and the pass goes on to the
    next one (one bad selector must not leave every other quota without a refresh)."""
    docs = [d for n in namespaces for d in await _list(n)] if namespaces else await _list(None)
    await passes.each("SpendQuota refresh", docs, lambda d: _refresh_one(d, exists), _ident)


def _ident(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


async def _refresh_one(doc: Mapping[str, Any], exists: Callable[[str], bool]) -> None:
    try:
        spec = SpendQuotaSpec.model_validate(doc.get("spec") or {})
    except ValidationError as exc:
        await _refuse(doc, exc)  # admitted before today's schema: said, not skipped
        return
    meta = doc["metadata"]
    status = doc.get("status") or {}
    entries = [
        e
        for e in status.get("entries") or []
        if e.get("state") == "spent" or exists(str(e.get("uid")))
    ]
    generation = int(meta.get("generation") or 0)
    fields = quota.summary(spec, entries, clock(), status.get("conditions"), generation)
    if spec.selector is not None:
        verdict = await _selector_verdict(meta["namespace"], spec.selector.match_labels)
        fields["conditions"] = set_condition(
            fields["conditions"],
            type_=SELECTOR_UNMATCHED,
            status=verdict.status,
            reason=verdict.reason,
            message=verdict.message,
            generation=generation,
        )
    if any(status.get(k) != v for k, v in fields.items()):
        await _write(doc, fields)  # a conflict: someone just wrote it; next pass


async def _refuse(doc: Mapping[str, Any], exc: ValidationError) -> None:
    """A quota whose spec the model refuses: ``Ready=False Invalid`` naming the fields (and
    ``SelectorUnmatched=True Invalid`` when the selector is what is wrong)."""
    errors = field_errors(exc, ("spec",))
    message = errors_message(errors, limit=3)
    generation = int((doc.get("metadata") or {}).get("generation") or 0)
    status = doc.get("status") or {}
    conditions = set_condition(
        status.get("conditions"), READY, "False", REASON_INVALID, message, generation
    )
    if any(e.path.startswith("spec.selector") for e in errors):
        conditions = set_condition(
            conditions, SELECTOR_UNMATCHED, "True", REASON_INVALID, message, generation
        )
    fields = {"conditions": conditions, "observedGeneration": generation}
    if any(status.get(k) != v for k, v in fields.items()):
        await _write(doc, fields)


async def _selector_verdict(namespace: str, labels: Mapping[str, str]) -> Condition:
    """``SelectorUnmatched`` of a quota's selector; an invalid one (the apiserver refuses it,
    400) says so, naming the field, instead of failing the refresh."""
    try:
        matched = await _selector_matches(namespace, labels)
    except k8s.ApiError as exc:
        if exc.status != 400:
            raise
        return Condition(
            SELECTOR_UNMATCHED,
            "True",
            REASON_INVALID,
            "spec.selector.matchLabels is not a valid label selector: " + _first_line(str(exc)),
        )
    if matched:
        return Condition(
            SELECTOR_UNMATCHED, "False", REASON_MATCHED, "the selector matches a Topology or Agent"
        )
    return Condition(
        SELECTOR_UNMATCHED,
        "True",
        REASON_NO_MATCH,
        "the selector matches no Topology or Agent in the namespace: the quota covers no Run",
    )


def _first_line(text: str) -> str:
    return str(text).strip().splitlines()[0][:300] if str(text).strip() else "refused"


async def _selector_matches(namespace: str, labels: Mapping[str, str]) -> bool:
    selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    for plural in ("topologies", "agents"):
        if await k8s.list_objects(k8s.custom_path(plural, namespace), selector):
            return True
    return False


__all__ = [
    "BUDGET_RECHECK_SECONDS",
    "Refusal",
    "covering",
    "refresh",
    "release",
    "reserve_all",
    "settle",
]
