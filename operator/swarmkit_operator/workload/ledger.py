"""What proves a workload object the operator's between its create and its record.

The pipeline records the uid of every object it creates for a target in the target's
``status.createdUids`` (only the operator writes a status). Between the create and the
status write that records it, and when that write fails and is retried, the
:class:`Ledger` holds it (see :func:`~swarmkit_operator.builders.trust.check_made`, and
``docs/design/trust-and-adoption.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from ..builders import trust
from ..builders.workload import Target


class Ledger:
    """The uids of the workload objects this process created (or proved its own) for each
    target, until the target's ``status.createdUids`` shows them, and since when this
    process writes: with the recorded uids, what proves an object under a derived name is
    the operator's (:func:`~swarmkit_operator.builders.trust.check_made`).

    One per operator, kept by the one :class:`~.resolve.Resolver` every pipeline shares (a
    Run's, a served Topology's, a gateway's). Bounded: an entry goes once the record shows
    it (:meth:`record`) or its target is gone (:meth:`forget`)."""

    def __init__(self) -> None:
        self.since: datetime | None = None
        # Keyed by the target's uid and workload: one owner may create for more than one
        # (a Topology serves and promotes), each with its own record.
        self._made: dict[tuple[str, str], dict[str, str]] = {}

    def __len__(self) -> int:
        return len(self._made)

    def start(self) -> None:
        """This process starts writing (a controller's workers start: it leads)."""
        if self.since is None:
            self.since = datetime.now(UTC)

    def proof(
        self, target: Target, recorded: Mapping[str, str], not_before: datetime | None = None
    ) -> trust.Made:
        mine = self._made.get(_key(target)) or {}
        return trust.Made(dict(recorded), frozenset(mine.values()), self.since, not_before)

    def remember(self, target: Target, kind: str, name: str, uid: str) -> None:
        if uid:
            self._made.setdefault(_key(target), {})[trust.made_key(kind, name)] = uid

    def record(self, target: Target, recorded: Mapping[str, str]) -> dict[str, str] | None:
        """``status.createdUids`` as the target's next status write must record it, or None
        when ``recorded`` has everything already (then this process forgets its entries)."""
        mine = self._made.get(_key(target))
        if not mine:
            return None
        if all(recorded.get(k) == v for k, v in mine.items()):
            del self._made[_key(target)]
            return None
        return {**recorded, **mine}

    def recorded(self, target: Target, recorded: Mapping[str, str]) -> dict[str, str]:
        """``status.createdUids`` as every status write of the target carries it (an apply
        drops a field it leaves out): ``recorded`` (what the status read shows, perhaps
        from before this process's last record) with what this process made since."""
        return self.record(target, recorded) or dict(recorded)

    def forget(self, uid: str) -> None:
        """Target ``uid`` is final, gone, or its workload was deleted."""
        for key in [k for k in self._made if k[0] == uid]:
            del self._made[key]


def _key(target: Target) -> tuple[str, str]:
    return (target.uid, target.workload)


__all__ = ["Ledger"]
