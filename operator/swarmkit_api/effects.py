"""Effects: what an agent does to shared platform state, carried from the runner to the operator.

The runner never talks to the Kubernetes API. The ``schedule``, ``agent_message`` and
``mailbox_send`` builtins each record an :class:`Effect` in the run's outbox (numbered
``seq`` 0, 1, ... across the whole run, resumes included: the sequence is part of the
journal, so a resumed run neither repeats nor renumbers one). At the end of each stage
(the run ends or parks) the runner prints the effects recorded live in that stage on one
stdout line (:data:`OUTBOX_LINE_PREFIX`) and puts the line's sha256 in its result, like the
checkpoint: the result itself is capped at 4 KiB, a message is not.

The operator checks the line against the sha256, merges the effects into the Run's
``status.effects`` and materializes each one once: the object it creates is named from the
Run's uid and the effect's ``seq`` (:func:`object_name`), so a repeat create answers 409 and
counts as done.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from . import stage_lines
from .base import ApiModel

EffectKind = Literal["schedule", "agent_message", "mailbox_send", "approve_spend"]
EffectState = Literal["Pending", "Materialized", "Failed"]

#: The stdout line prefix of a stage's outbox (one line; the result carries its sha256).
OUTBOX_LINE_PREFIX = "swarmkit.outbox "
#: Labels on what an effect created: the Run that caused it and the effect's sequence.
EFFECT_RUN_LABEL = "swarmkit.dev/effect-of"
EFFECT_SEQ_LABEL = "swarmkit.dev/effect-seq"
#: A Run created by ``schedule`` carries the scheduling Run's name here.
SCHEDULED_BY_LABEL = "swarmkit.dev/scheduled-by"
#: A Run created by ``agent_message`` carries the sending Run's name here.
MESSAGED_BY_LABEL = "swarmkit.dev/messaged-by"
#: A MailboxMessage carries its mailbox name here (``kubectl get skmb -l``).
MAILBOX_LABEL = "swarmkit.dev/mailbox"
#: A MailboxMessage whose mailbox posts to a webhook: pending until delivered or given up.
DELIVERY_LABEL = "swarmkit.dev/webhook-delivery"
DELIVERY_PENDING = "pending"


class Effect(ApiModel):
    """One effect recorded by the runner (the wire form of an outbox entry)."""

    seq: int = Field(ge=0, description="Sequence of the effect in its run (0, 1, ...).")
    kind: EffectKind = Field(
        description="schedule, agent_message, mailbox_send or approve_spend (let a Run this "
        "run started start past a SpendQuota hold)."
    )
    agent: str = Field(description="The agent that caused it.")
    to: str = Field(
        default="",
        description="agent_message: the target Agent; mailbox_send: the mailbox; "
        "schedule: the Topology to run; approve_spend: the held Run.",
    )
    message: str = Field(
        default="", description="The message (agent_message, mailbox_send) or input (schedule)."
    )
    start_after: datetime | None = Field(
        default=None, description="schedule: when the scheduled Run starts."
    )
    workspace: str = Field(
        default="", description="mailbox_send: the Workspace that declares the mailbox."
    )


class RunEffect(ApiModel):
    """An effect as the Run's status shows it (the message itself is kept on the object)."""

    seq: int = Field(ge=0, description="Sequence of the effect in the run.")
    kind: EffectKind = Field(
        description="schedule, agent_message, mailbox_send or approve_spend (let a Run this "
        "run started start past a SpendQuota hold)."
    )
    agent: str = Field(description="The agent that caused it.")
    to: str = Field(default="", description="Target Agent, mailbox or Topology.")
    start_after: datetime | None = Field(
        default=None, description="schedule: when the scheduled Run starts."
    )
    state: EffectState = Field(
        default="Pending",
        description="Pending (recorded, not created yet), Materialized (its object exists), "
        "Failed (it cannot be created; message says why).",
    )
    object: str | None = Field(
        default=None, description="The object it created (kind/name): a Run or MailboxMessage."
    )
    message: str = Field(default="", description="Why it failed, when it did.")
    uid: str | None = Field(
        default=None,
        description="approve_spend: the uid of the Run approved (a Run deleted and created "
        "again under its name is another Run, not approved).",
    )


def outbox_line(effects: list[Effect]) -> tuple[str, str]:
    """The stdout line carrying ``effects`` and the sha256 of its encoded text."""
    return stage_lines.line(OUTBOX_LINE_PREFIX, [e.wire() for e in effects])


def outbox_from_log(log: str, sha256: str) -> list[Effect] | None:
    """The effects on the outbox line of ``log`` whose sha256 is ``sha256`` (None: absent)."""
    found = stage_lines.from_log(log, OUTBOX_LINE_PREFIX, sha256)
    return None if found is None else [Effect.model_validate(e) for e in found]


def object_name(run_name: str, run_uid: str, seq: int) -> str:
    """The name of the object effect ``seq`` of a Run creates (stable: a repeat is a 409)."""
    return f"{run_name[:40].rstrip('-.')}-{run_uid.replace('-', '')[:8]}-fx{seq}"


__all__ = [
    "DELIVERY_LABEL",
    "DELIVERY_PENDING",
    "EFFECT_RUN_LABEL",
    "EFFECT_SEQ_LABEL",
    "MAILBOX_LABEL",
    "MESSAGED_BY_LABEL",
    "OUTBOX_LINE_PREFIX",
    "SCHEDULED_BY_LABEL",
    "Effect",
    "EffectKind",
    "EffectState",
    "RunEffect",
    "object_name",
    "outbox_from_log",
    "outbox_line",
]
