"""Exceptions that decide how a run, or one tool call, ends."""

from __future__ import annotations

from typing import cast, get_args

from swarmkit_api.bundle import Outcome, ReviewItem


class BundleError(Exception):
    """The bundle is missing, invalid or inconsistent (exit code 2, ValidationFailed)."""

    outcome: Outcome = "ValidationFailed"


class TamperedFile(BundleError):
    """A file the operator mounted is not the one it wrote: a skill file whose sha256 is
    not the one the (checked) bundle records. Outcome TamperedObject, exit code 2: the pod
    would mount the same ConfigMap again, so nothing is retried."""

    outcome: Outcome = "TamperedObject"


class StartupError(Exception):
    """The run cannot start as configured (e.g. a native tool the runtime cannot provide).

    Reported as ValidationFailed (exit code 2): the configuration, not the run, is wrong.
    """


class RunEnded(Exception):
    """Ends the whole run with ``outcome``; never turned into a tool error."""

    outcome: Outcome = "Failed"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LimitExceeded(RunEnded):
    """A governance limit was hit (steps per agent, steps per run, tokens per run)."""

    outcome: Outcome = "LimitExceeded"


class BudgetExceeded(RunEnded):
    """The run's spend cap (maxCost / maxTokens) would be crossed by its next model call."""

    outcome: Outcome = "BudgetExceeded"


class RunFailed(RunEnded):
    """The run cannot go on (e.g. the model API keeps failing)."""

    outcome: Outcome = "Failed"


class ModelError(RunFailed):
    """A model provider call failed after its retries."""


class ModelRefused(ModelError):
    """The model (or the provider's content filter) refused to answer; never retried."""


class Truncated(RunFailed):
    """An answer was cut off at the token limit (past its continuations, or in a tool call).

    The Run ends ``Succeeded=False`` with the reason ``Truncated`` (the message starts
    ``Truncated:``): a cut answer is never passed off as a success."""

    outcome: Outcome = "Truncated"


class HarnessEnded(RunEnded):
    """A harness node's CLI failed, hung past its timeout or asked a question: the run ends
    with that outcome (``HarnessFailed``, ``HarnessTimedOut``, ``HarnessAskedQuestion``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        # The reason constants are the outcomes' names; anything else is a plain failure.
        self.outcome = cast("Outcome", reason) if reason in get_args(Outcome) else "Failed"


class AwaitingReview(RunEnded):
    """The run parks for a person (outcome AwaitingReview) with the items to decide."""

    outcome: Outcome = "AwaitingReview"

    def __init__(self, message: str, items: list[ReviewItem]) -> None:
        super().__init__(message)
        self.items = items


class ToolError(Exception):
    """A tool call failed; the model sees ``code: message`` as the tool result."""

    def __init__(self, message: str, code: str = "ToolError") -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class ToolRefused(ToolError):
    """A policy refused the call (permission tier, scopes, provenance, depth).

    The model sees ``code: message`` like any tool error; the call is audited as
    ``tool.refused`` (not ``tool.call``) and never retried.
    """


class InvalidArguments(ToolError):
    """The model's arguments do not match the tool's input schema (never retried)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "InvalidArguments")


class ReviewUnavailable(Exception):
    """No person can be asked: the Review could not be created (the reason says why), or it
    went away while the call waited. Where this is raised the call falls back to what it
    does with nobody to ask (a strict call is refused with this reason)."""
