"""The MailboxMessage resource: an item an agent put in a named mailbox, for people to read.

Created by the operator from a run's ``mailbox_send`` effect (the runner has no API access),
named from the Run's uid and the effect's sequence, labelled with its mailbox
(``swarmkit.dev/mailbox``). ``spec.mailbox``, ``spec.message`` and ``spec.sender`` never
change. A person acknowledges it by writing ``spec.acknowledgement {by}``: RBAC decides who
may (the ``swarmkit-mailbox-reader`` and ``swarmkit-mailbox-acknowledger`` roles, like
Reviews' ``swarmkit-reviewer``), and the ValidatingAdmissionPolicy shipped with the chart
(``swarmkit-mailbox-acknowledgements``) requires ``by`` to be the authenticated user of that
very request; the CRD refuses any change to an acknowledgement once written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from .base import ApiModel, CelRule
from .common import Conditions


class MessageSender(ApiModel):
    """Who sent the item: the agent and its Run."""

    agent: str = Field(description="The agent that called mailbox_send.")
    run: str = Field(description="The Run it ran in.")
    correlation_id: str = Field(default="", description="The Run's correlation id.")


class Acknowledgement(ApiModel):
    """A person's acknowledgement. ``by`` must be the authenticated user who writes it."""

    by: str = Field(
        min_length=1,
        max_length=253,
        description="Your user name exactly as the apiserver authenticates you (kubectl auth "
        "whoami); the admission policy refuses anything else.",
    )
    comment: str | None = Field(default=None, max_length=4096, description="Optional note.")


def _unchanged(_: object) -> bool:
    return True  # a transition rule: only the apiserver sees the old object


class MailboxMessageSpec(ApiModel):
    """The item (immutable) and, once a person read it, the acknowledgement."""

    cel_rules = (
        CelRule(
            rule="self.mailbox == oldSelf.mailbox && self.message == oldSelf.message && "
            "self.sender == oldSelf.sender && self.workspace == oldSelf.workspace",
            message="mailbox, message, sender and workspace are immutable (written by the "
            "operator)",
            field_path=".message",
            check=_unchanged,
        ),
        CelRule(
            rule="!has(oldSelf.acknowledgement) || (has(self.acknowledgement) && "
            "self.acknowledgement == oldSelf.acknowledgement)",
            message="this item is already acknowledged; an acknowledgement is final",
            field_path=".acknowledgement",
            check=_unchanged,
        ),
    )

    mailbox: str = Field(
        min_length=1,
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="The mailbox (a name agents write to and people read).",
    )
    message: str = Field(max_length=65536, description="The message.")
    sender: MessageSender = Field(description="Who sent it (agent and Run).")
    workspace: str = Field(
        min_length=1,
        max_length=253,
        description="The Workspace that declares the mailbox (its webhook, if any).",
    )
    acknowledgement: Acknowledgement | None = Field(
        default=None, description="Written by the person who read it (final)."
    )


class WebhookDelivery(ApiModel):
    """How posting the item to its mailbox's webhook went (never the URL)."""

    state: Literal["Pending", "Delivered", "Failed"] = Field(
        description="Pending (not delivered yet; retried with backoff), Delivered, Failed "
        "(gave up after the last attempt)."
    )
    attempts: int = Field(default=0, ge=0, description="Attempts so far.")
    last_attempt_time: datetime | None = Field(default=None, description="When it was tried.")
    next_attempt_time: datetime | None = Field(default=None, description="When it is retried.")
    delivered_time: datetime | None = Field(default=None, description="When it was delivered.")
    last_error: str = Field(
        default="", description="The last failure (an HTTP status or error type, never the URL)."
    )


class MailboxMessageStatus(ApiModel):
    """What the operator made of the item."""

    delivery: WebhookDelivery | None = Field(
        default=None, description="The webhook delivery, when the mailbox has a webhook."
    )
    conditions: Conditions = Field(default_factory=list, description="Conditions.")


__all__ = [
    "Acknowledgement",
    "MailboxMessageSpec",
    "MailboxMessageStatus",
    "MessageSender",
    "WebhookDelivery",
]
