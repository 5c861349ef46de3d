"""Who is asking, and what Kubernetes lets them see: the web view's per-user filter.

Behind an authenticating proxy (oauth2-proxy with ``--pass-user-headers``), every request
carries the person's user name in ``X-Forwarded-User`` and their groups in
``X-Forwarded-Groups`` (one header per group, or a comma list): :func:`identity_of`. The
headers are trusted because nothing but the proxy can send them: in per-user mode the web
view listens on loopback only (the chart puts oauth2-proxy in the operator's pod as its one
way in; the operator refuses a non-loopback address in this mode), and oauth2-proxy
replaces whatever identity headers a client sent.

:class:`Access` answers "may this person ``verb`` this kind in this namespace?" with a
SubjectAccessReview (the callable it is given: the API call stays out of this package),
caching each answer for :data:`CACHE_SECONDS` in a cache of at most :data:`CACHE_ENTRIES`
(oldest dropped first), so a page costs one review per namespace and kind, not per object.
A review that fails (apiserver unreachable) counts as "no": the page shows less, never more.

Single-user mode (the chart's ``webView.singleUser``, the demo) has no identity and no
reviews: whoever reaches the port sees what the operator sees, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger("swarmkit_operator.webview")

USER_HEADER = "X-Forwarded-User"
GROUPS_HEADER = "X-Forwarded-Groups"
#: How long one answer is reused: a RoleBinding removed shows on the pages this late.
CACHE_SECONDS = 10.0
#: At most this many answers are kept (people x namespaces x kinds x verbs).
CACHE_ENTRIES = 4096

#: The swarmkit.dev resource each page reads.
SKILLS, AGENTS, RUNS, MAILBOX_MESSAGES = "skills", "agents", "runs", "mailboxmessages"


@dataclass(frozen=True)
class Identity:
    """The person behind the proxy: what the apiserver calls them, and their groups."""

    user: str
    groups: tuple[str, ...] = ()


def identity_of(user: str | None, groups: Iterable[str] = ()) -> Identity | None:
    """The proxy's ``X-Forwarded-User`` and ``X-Forwarded-Groups`` values (each value may be
    a comma list) as an :class:`Identity`; None when there is no user."""
    name = (user or "").strip()
    if not name:
        return None
    found = sorted({g.strip() for value in groups for g in str(value).split(",") if g.strip()})
    return Identity(name, tuple(found))


#: The SubjectAccessReview: (user, groups, namespace, verb, resource) → allowed.
Review = Callable[[str, tuple[str, ...], str, str, str], Awaitable[bool]]
Key = tuple[Identity, str, str, str]


class Access:
    """Cached SubjectAccessReview answers (see the module docstring)."""

    def __init__(
        self,
        review: Review,
        ttl: float = CACHE_SECONDS,
        max_entries: int = CACHE_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._review = review
        self._ttl = ttl
        self._max = max_entries
        self._clock = clock
        self._answers: OrderedDict[Key, tuple[float, bool]] = OrderedDict()
        #: Reviews asked but not answered yet: concurrent pages share one.
        self._asking: dict[Key, asyncio.Future[bool]] = {}

    async def allowed(self, who: Identity, namespace: str, verb: str, resource: str) -> bool:
        key = (who, namespace, verb, resource)
        now = self._clock()
        cached = self._answers.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        pending = self._asking.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._asking[key] = future
        try:
            answer = await self._ask(who, namespace, verb, resource)
        except BaseException:  # cancelled: the pages waiting on it are told so
            future.cancel()
            raise
        finally:
            del self._asking[key]
        future.set_result(answer)
        self._remember(key, answer)
        return answer

    async def _ask(self, who: Identity, namespace: str, verb: str, resource: str) -> bool:
        try:
            return await self._review(who.user, who.groups, namespace, verb, resource)
        except Exception as exc:  # fail closed: the page shows less, never more
            log.warning(
                "web view: cannot review %s %s in %s for %s (%s): not shown",
                verb,
                resource,
                namespace,
                who.user,
                exc,
            )
            return False

    def _remember(self, key: Key, answer: bool) -> None:
        self._answers[key] = (self._clock() + self._ttl, answer)
        self._answers.move_to_end(key)
        while len(self._answers) > self._max:
            self._answers.popitem(last=False)

    async def namespaces(
        self, who: Identity, namespaces: Iterable[str], verb: str, resource: str
    ) -> frozenset[str]:
        """Those of ``namespaces`` where ``who`` may ``verb`` ``resource`` (asked at once)."""
        wanted = sorted(set(namespaces))
        answers = await asyncio.gather(*(self.allowed(who, ns, verb, resource) for ns in wanted))
        return frozenset(ns for ns, ok in zip(wanted, answers, strict=True) if ok)

    def __len__(self) -> int:
        return len(self._answers)


__all__ = [
    "AGENTS",
    "CACHE_ENTRIES",
    "CACHE_SECONDS",
    "GROUPS_HEADER",
    "MAILBOX_MESSAGES",
    "RUNS",
    "SKILLS",
    "USER_HEADER",
    "Access",
    "Identity",
    "Review",
    "identity_of",
]
