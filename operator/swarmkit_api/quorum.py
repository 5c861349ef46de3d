"""Whether a funnel approval holds: the pure quorum computation over recorded signatures.

The operator (deciding when a parked gate resumes) and ``kubectl swarmkit review`` (showing
who signed and what is missing) both call :func:`tally`; nothing here does I/O.

Semantics (SwarmKit's multi-party approval, with Kubernetes identities):

* a signature is one person (``decidedBy``, checked by the admission policy to be the
  authenticated user and to hold ``role`` by user name or group) in one role;
* ``all``: every role of the rule has a signature; ``any``: one role has; ``kOf: N``: N
  distinct people signed in roles of the rule (two people of one group count twice, one
  person in two roles once);
* every rule must hold, and ``minDistinctApprovers`` distinct people must have signed
  across the rules (a person holding two roles counts once: the four-eyes floor);
* ``excludeAuthor``: a signature of the Run's creator does not count (the admission policy
  refuses it first; this keeps the tally right for anything recorded before);
* one ``reject`` by a role holder rejects the gate; one ``revise`` (with no reject) asks
  for a revision: the run resumes, the drafting agent revises with the comment, and the new
  artifact opens the next approval round (a new Review).

Rounds (``approve.onRevision``, SwarmKit's ``on_revision``): the earlier rounds of the gate
(:class:`~swarmkit_api.funnel.ApprovalRound`, each ended by a revision) are passed as
``earlier``:

* ``resetAll`` (the default): no earlier signature counts; everyone signs the revised
  artifact again;
* ``reconfirmChanged``: an earlier ``approve`` carries into this round for every rule that
  no later revision touched. A revision touches the rules naming the role it was asked in
  (SwarmKit's ``after_revision`` keeps approvals whose scope is not among the changed
  scopes; here a rule is the scope, and the concern a revision addressed is its role's).
  The carried signature counts toward its rules and the distinct-people floor like one
  given in this round.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .funnel import Approval, ApprovalRound, ApprovalRule, ApproveLayer

#: The user names Kubernetes gives ServiceAccounts: not people (anyone who may create the
#: account's token acts as it), so their signatures never count.
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class RuleTally:
    """One rule: who signed in which of its roles, and what is still missing."""

    index: int
    rule: ApprovalRule
    signed: dict[str, tuple[str, ...]]
    people: tuple[str, ...]
    satisfied: bool
    missing: str

    @property
    def need(self) -> str:
        if self.rule.k_of is not None:
            return f"{self.rule.k_of} of {', '.join(self.rule.roles)}"
        return f"{self.rule.quorum} of {', '.join(self.rule.roles)}"


@dataclass(frozen=True)
class Tally:
    """The gate as the signatures so far leave it."""

    rules: tuple[RuleTally, ...]
    approvers: tuple[str, ...]
    min_distinct: int
    rejected_by: str | None
    ignored: tuple[str, ...]
    revision: Approval | None = None
    carried: tuple[str, ...] = ()

    @property
    def approved(self) -> bool:
        return (
            self.rejected_by is None
            and self.revision is None
            and all(r.satisfied for r in self.rules)
            and len(self.approvers) >= self.min_distinct
        )

    @property
    def missing(self) -> list[str]:
        """What is still needed, one line per unmet requirement."""
        out = [f"rule {r.index + 1} ({r.need}): {r.missing}" for r in self.rules if r.missing]
        if len(self.approvers) < self.min_distinct:
            out.append(
                f"minDistinctApprovers: {len(self.approvers)} of {self.min_distinct} distinct "
                "people signed"
            )
        return out


def _rule_tally(index: int, rule: ApprovalRule, approvals: Iterable[Approval]) -> RuleTally:
    signed: dict[str, tuple[str, ...]] = {}
    for role in rule.roles:
        people = tuple(dict.fromkeys(a.decided_by for a in approvals if a.role == role))
        if people:
            signed[role] = people
    people = tuple(dict.fromkeys(p for who in signed.values() for p in who))
    unsigned = [r for r in rule.roles if r not in signed]
    if rule.k_of is not None:
        satisfied = len(people) >= rule.k_of
        missing = "" if satisfied else f"{rule.k_of - len(people)} more distinct signer(s)"
    elif rule.quorum == "all":
        satisfied = not unsigned
        missing = "" if satisfied else "waiting for " + ", ".join(unsigned)
    else:
        satisfied = bool(signed)
        missing = "" if satisfied else "waiting for one of " + ", ".join(rule.roles)
    return RuleTally(index, rule, signed, people, satisfied, missing)


def _counts(policy: ApproveLayer, a: Approval, author: str | None) -> str | None:
    """Why signature ``a`` does not count (None: it counts)."""
    if a.decided_by.startswith(SERVICE_ACCOUNT_PREFIX):
        # Anyone who may create its token signs as it: not a person (issue 46 item 6).
        return f"{a.decided_by}: a ServiceAccount, not a person"
    members = policy.roles.get(a.role)
    if members is None:
        return f"{a.decided_by}: unknown role {a.role}"
    # Admission checked the signer against the role; the operator re-checks what it can
    # see itself (a role held only by user names), so a signature that slipped past an
    # older policy or a disabled one does not count (group membership it cannot see).
    if not members.groups and a.decided_by not in members.users:
        return f"{a.decided_by}: does not hold role {a.role}"
    if policy.exclude_author and author and a.decided_by == author:
        return f"{a.decided_by}: created the run (excludeAuthor)"
    return None


def carried_over(
    policy: ApproveLayer, earlier: Sequence[ApprovalRound], author: str | None
) -> list[tuple[Approval, frozenset[int], int]]:
    """The earlier approvals that still count, with the rule indexes each counts for and
    its round (empty under ``resetAll``; see the module docstring)."""
    if policy.on_revision != "reconfirmChanged":
        return []
    out: list[tuple[Approval, frozenset[int], int]] = []
    for n, past in enumerate(earlier):
        touched: set[int] = set()
        for later in earlier[n:]:
            for a in later.approvals:
                if a.verdict == "revise" and _counts(policy, a, author) is None:
                    touched |= {i for i, r in enumerate(policy.rules) if a.role in r.roles}
        rules = frozenset(range(len(policy.rules))) - touched
        for a in past.approvals:
            if a.verdict == "approve" and rules and _counts(policy, a, author) is None:
                out.append((a, rules, past.round))
    return out


def tally(
    policy: ApproveLayer,
    approvals: Iterable[Approval],
    author: str | None,
    earlier: Sequence[ApprovalRound] = (),
) -> Tally:
    """The gate's state from the signatures recorded so far in this round and, per
    ``onRevision``, in the ``earlier`` rounds (see the module docstring)."""
    counted: list[Approval] = []
    ignored: list[str] = []
    rejected_by = None
    revision = None
    for a in approvals:
        why = _counts(policy, a, author)
        if why is not None:
            ignored.append(why)
        elif a.verdict == "reject":
            rejected_by = rejected_by or a.decided_by
        elif a.verdict == "revise":
            revision = revision or a
        else:
            counted.append(a)
    carried = carried_over(policy, earlier, author)
    rules = tuple(
        _rule_tally(i, r, [*(a for a, idx, _ in carried if i in idx), *counted])
        for i, r in enumerate(policy.rules)
    )
    approvers = tuple(dict.fromkeys(p for r in rules for p in r.people))
    return Tally(
        rules,
        approvers,
        policy.min_distinct_approvers,
        rejected_by,
        tuple(ignored),
        revision,
        tuple(f"{a.decided_by} as {a.role} (round {n})" for a, _, n in carried),
    )


__all__ = ["SERVICE_ACCOUNT_PREFIX", "RuleTally", "Tally", "carried_over", "tally"]
