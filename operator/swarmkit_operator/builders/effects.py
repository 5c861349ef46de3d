"""What a Run's effects become (pure): the scheduled Run, the messaged agent's Run, the
mailbox item, and the Run's ``status.effects`` entries.

Every object is named :func:`swarmkit_api.effects.object_name` (the sending Run's name and
uid, the effect's sequence) and labelled with the Run's uid and the sequence, so creating it
twice answers 409 and is treated as done.

* ``schedule`` → a Run of the Topology with ``spec.startAfter`` (it waits with
  ``Succeeded=Unknown`` reason ``Scheduled`` until then), owned by the Topology: cancelling
  or deleting the scheduling Run leaves it alone, deleting the Topology deletes it.
* ``agent_message`` → a single-agent Run of the target (input = the message, correlation id
  = the sender's). Not owned: like a Run a person creates, it outlives its sender.
* ``mailbox_send`` → a MailboxMessage, not owned (people read it after the Run is gone).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from swarmkit_api.effects import (
    DELIVERY_LABEL,
    DELIVERY_PENDING,
    EFFECT_RUN_LABEL,
    EFFECT_SEQ_LABEL,
    MAILBOX_LABEL,
    MESSAGED_BY_LABEL,
    SCHEDULED_BY_LABEL,
    Effect,
    RunEffect,
    object_name,
)
from swarmkit_api.resources import API_VERSION

from ..hashing import label_value

MANAGED = {"app.kubernetes.io/managed-by": "swarmkit-operator"}
TOPOLOGY_LABEL = "swarmkit.dev/topology"


def _meta(
    name: str, namespace: str, run_uid: str, effect: Effect, labels: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "labels": {
            **MANAGED,
            EFFECT_RUN_LABEL: run_uid,
            EFFECT_SEQ_LABEL: str(effect.seq),
            **labels,
        },
    }


def scheduled_run(
    run_name: str,
    namespace: str,
    run_uid: str,
    correlation_id: str,
    effect: Effect,
    topology_uid: str,
) -> dict[str, Any]:
    """The Run a ``schedule`` effect creates (owned by its Topology)."""
    name = object_name(run_name, run_uid, effect.seq)
    meta = _meta(
        name,
        namespace,
        run_uid,
        effect,
        {SCHEDULED_BY_LABEL: label_value(run_name), TOPOLOGY_LABEL: label_value(effect.to)},
    )
    meta["ownerReferences"] = [
        {
            "apiVersion": API_VERSION,
            "kind": "Topology",
            "name": effect.to,
            "uid": topology_uid,
            "controller": True,
            "blockOwnerDeletion": False,
        }
    ]
    spec: dict[str, Any] = {
        "topologyRef": {"name": effect.to},
        "input": effect.message,
        "correlationId": correlation_id,
    }
    if effect.start_after is not None:
        spec["startAfter"] = effect.start_after.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": API_VERSION, "kind": "Run", "metadata": meta, "spec": spec}


def message_run(
    run_name: str, namespace: str, run_uid: str, correlation_id: str, effect: Effect
) -> dict[str, Any]:
    """The single-agent Run an ``agent_message`` effect creates."""
    name = object_name(run_name, run_uid, effect.seq)
    meta = _meta(name, namespace, run_uid, effect, {MESSAGED_BY_LABEL: label_value(run_name)})
    spec = {
        "agentRef": {"name": effect.to},
        "input": effect.message,
        "correlationId": correlation_id,
    }
    return {"apiVersion": API_VERSION, "kind": "Run", "metadata": meta, "spec": spec}


def mailbox_message(
    run_name: str,
    namespace: str,
    run_uid: str,
    correlation_id: str,
    effect: Effect,
    webhook: bool = False,
) -> dict[str, Any]:
    """The MailboxMessage a ``mailbox_send`` effect creates (``webhook``: its mailbox posts
    to a webhook, so the item is labelled for delivery)."""
    name = object_name(run_name, run_uid, effect.seq)
    labels = {MAILBOX_LABEL: label_value(effect.to)}
    if webhook:
        labels[DELIVERY_LABEL] = DELIVERY_PENDING
    meta = _meta(name, namespace, run_uid, effect, labels)
    return {
        "apiVersion": API_VERSION,
        "kind": "MailboxMessage",
        "metadata": meta,
        "spec": {
            "mailbox": effect.to,
            "message": effect.message,
            "sender": {"agent": effect.agent, "run": run_name, "correlationId": correlation_id},
            "workspace": effect.workspace,
        },
    }


def status_entries(
    current: Iterable[Mapping[str, Any]], settled: Iterable[RunEffect]
) -> list[dict[str, Any]]:
    """``status.effects``: the current entries with ``settled`` merged in by ``seq``."""
    by_seq = {int(e.get("seq", -1)): dict(e) for e in current}
    for effect in settled:
        by_seq[effect.seq] = effect.wire()
    return [by_seq[k] for k in sorted(by_seq)]


__all__ = ["mailbox_message", "message_run", "scheduled_run", "status_entries"]
