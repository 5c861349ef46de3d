"""The per-user web view without a cluster: identities from the proxy's headers, the cached
access reviews, and pages filtered per person (the real apiserver answers them in
tests/integration/test_webview_users.py, driven by Chromium as two people)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import httpx
import pytest

from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.library import SkillLibrary
from swarmkit_operator.webview import Access, Sources, WebView, is_loopback
from swarmkit_operator.webview.access import Identity, identity_of

from .fixtures import indexes, run, skill
from .test_webview_mailboxes import item

#: (user, namespace, verb, resource) the fake apiserver allows; a group "team-b" too.
ALLOWED = {
    ("alice", "team-a", v, r)
    for v in ("get", "list")
    for r in ("skills", "agents", "runs", "mailboxmessages")
} | {("carol", "team-a", "list", "mailboxmessages")}


class FakeReviews:
    """Answers like RBAC would for ALLOWED (and the group team-b for team-b), counting."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str, str]] = []
        self.fail = False
        self.delay = 0.0

    async def __call__(
        self, user: str, groups: tuple[str, ...], ns: str, verb: str, resource: str
    ) -> bool:
        self.asked.append((user, ns, verb, resource))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail:
            raise RuntimeError("apiserver unreachable")
        return (user, ns, verb, resource) in ALLOWED or ("team-b" in groups and ns == "team-b")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_identity_is_the_user_header_and_every_group_value() -> None:
    assert identity_of(None) is None and identity_of("  ") is None
    assert identity_of("alice") == Identity("alice")
    assert identity_of(" bob ", ["team-b, dev", "ops", ""]) == Identity(
        "bob", ("dev", "ops", "team-b")
    )


def test_only_loopback_counts_as_loopback() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.1.2.3", "::", "example.com"))


async def test_answers_are_cached_for_the_ttl_and_bounded() -> None:
    now = [0.0]
    reviews = FakeReviews()
    access = Access(reviews, ttl=10, max_entries=3, clock=lambda: now[0])
    alice = Identity("alice")
    assert await access.allowed(alice, "team-a", "list", "runs")
    assert await access.allowed(alice, "team-a", "list", "runs")
    assert len(reviews.asked) == 1
    now[0] = 10.5  # expired: asked again
    assert await access.allowed(alice, "team-a", "list", "runs")
    assert len(reviews.asked) == 2
    for ns in ("n1", "n2", "n3", "n4"):
        assert not await access.allowed(alice, ns, "list", "runs")
    assert len(access) == 3  # the oldest answers were dropped


async def test_a_failed_review_is_a_no_and_concurrent_pages_share_one_review() -> None:
    reviews = FakeReviews()
    reviews.fail = True
    access = Access(reviews)
    assert not await access.allowed(Identity("alice"), "team-a", "list", "runs")
    reviews.fail, reviews.delay = False, 0.05
    bob = Identity("bob", ("team-b",))
    answers = await asyncio.gather(
        *(access.allowed(bob, "team-b", "get", "runs") for _ in range(5))
    )
    assert answers == [True] * 5
    assert reviews.asked.count(("bob", "team-b", "get", "runs")) == 1


@pytest.fixture
async def per_user() -> AsyncIterator[tuple[httpx.AsyncClient, FakeReviews]]:
    idx = indexes()
    for ns in ("team-a", "team-b"):
        idx.update("skills", skill(f"skill-of-{ns}", namespace=ns))
        done = run(f"run-of-{ns}", namespace=ns, output=f"output of {ns}")
        first = {"head": "c" * 64, "lines": 12, "pod": f"run-of-{ns}-x1"}
        resumed = {"head": "d" * 64, "lines": 4, "pod": f"run-of-{ns}-resume-1-y2"}
        # team A's Run resumed once (a head per pod); team B's status is an older
        # operator's single head
        done["status"]["audit"] = [first, resumed] if ns == "team-a" else first
        idx.update("runs", done)
        idx.update("mailboxmessages", item(f"note-{ns}", f"secret plans of {ns}", namespace=ns))
    lib = SkillLibrary(OperatorConfig(), idx)
    for ns in ("team-a", "team-b"):  # a deleted skill's history: shown per namespace too
        lib.skill_seen(ns, f"gone-of-{ns}", "b" * 64)
        lib.skill_deleted(ns, f"gone-of-{ns}")
    reviews = FakeReviews()
    view = WebView(Sources(idx, lib), Access(reviews))
    port = free_port()
    await view.start("127.0.0.1", port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
            yield c, reviews
    finally:
        await view.stop()


async def test_no_identity_gets_401_and_no_object(
    per_user: tuple[httpx.AsyncClient, FakeReviews],
) -> None:
    client, reviews = per_user
    for path in ("/skills", "/runs", "/mailboxes", "/runs/team-a/run-of-team-a", "/nowhere"):
        resp = await client.get(path)
        assert resp.status_code == 401, path
        assert "team-a" not in resp.text and "X-Forwarded-User" in resp.text
    assert (await client.get("/static/style.css")).status_code == 200
    assert not reviews.asked


async def test_each_page_shows_a_person_only_their_namespaces(
    per_user: tuple[httpx.AsyncClient, FakeReviews],
) -> None:
    client, _ = per_user
    alice = {"X-Forwarded-User": "alice"}
    bob = {"X-Forwarded-User": "bob", "X-Forwarded-Groups": "dev,team-b"}
    page = (await client.get("/skills", headers=alice)).text
    assert "skill-of-team-a" in page and "skill-of-team-b" not in page
    assert "gone-of-team-a" in page and "gone-of-team-b" not in page
    assert 'id="viewer">alice<' in page
    page = (await client.get("/runs", headers=bob)).text
    assert "run-of-team-b" in page and "run-of-team-a" not in page
    mine = await client.get("/runs/team-a/run-of-team-a", headers=alice)
    assert mine.status_code == 200
    assert 'cccccccccccc</span> <span class="muted">(12 lines, pod run-of-team-a-x1)' in mine.text
    assert 'dddddddddddd</span> <span class="muted">(4 lines, pod run-of-team-a-resume-1-y2)' in (
        mine.text
    )
    assert "logs run/run-of-team-a -n team-a --verify" in mine.text
    theirs = (await client.get("/runs/team-b/run-of-team-b", headers=bob)).text
    assert 'cccccccccccc</span> <span class="muted">(12 lines, pod run-of-team-b-x1)' in theirs
    resp = await client.get("/runs/team-a/run-of-team-a", headers=bob)
    assert resp.status_code == 404 and "output of team-a" not in resp.text
    assert (await client.get("/skills/team-a/skill-of-team-a", headers=bob)).status_code == 404
    page = (await client.get("/mailboxes", headers=bob)).text
    assert "secret plans of team-b" in page and "team-a" not in page


async def test_mailbox_text_needs_get(per_user: tuple[httpx.AsyncClient, FakeReviews]) -> None:
    client, _ = per_user
    page = (await client.get("/mailboxes/team-a", headers={"X-Forwarded-User": "carol"})).text
    assert 'data-item="note-team-a"' in page
    assert "secret plans" not in page
    assert "message hidden: reading it needs get on MailboxMessages in team-a" in page
    page = (await client.get("/skills", headers={"X-Forwarded-User": "carol"})).text
    assert "skill-of-team-a" not in page
