"""After a start, many renders are proved the operator's by one LIST, not a GET each
(``reconcile/proofs.py``): the same proof (uid, immutable, the render's exact content),
so a forged or replaced ConfigMap is still refused, and a single render is still read."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from swarmkit_operator.builders import COMPONENT_LABEL, MANAGED_BY
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.handlers.root import wiring
from swarmkit_operator.reconcile import proofs
from tests.support.fake_k8s import FakeApi

WIRED = wiring()
NS = "team-a"


def render(i: int) -> dict[str, Any]:
    """A Skill's rendered ConfigMap as the operator renders it (the manifest)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"skill-s{i}-0000{i:04d}",
            "namespace": NS,
            "labels": {COMPONENT_LABEL: "skill", **MANAGED_BY},
        },
        "immutable": True,
        "data": {"SKILL.md": f"# Skill {i}\n"},
    }


def started(fake: FakeApi, count: int, forged: int | None = None) -> tuple[Any, list[Any]]:
    """``count`` renders in the API server (``forged``: that one made by someone else first,
    other content), and a new process's controller whose indexes listed them."""
    manifests = [render(i) for i in range(count)]
    for i, manifest in enumerate(manifests):
        made = dict(manifest)
        if i == forged:
            made["data"] = {"SKILL.md": "# Skill, edited by eve\n"}
        fake.create(made)
    ctl = WIRED.controller(OperatorConfig())
    for cm in fake.list("ConfigMap", NS):
        ctl.indexes.update("configmaps", cm, listed=True)
    return ctl, manifests


def reads(fake: FakeApi) -> tuple[int, int]:
    """(GETs of one ConfigMap, LISTs of ConfigMaps) made so far."""
    gets = sum(1 for v, p in fake.requests if v == "GET" and "/configmaps/" in p)
    lists = sum(1 for v, p in fake.requests if v == "GET" and p.endswith("/configmaps"))
    return gets, lists


async def test_many_renders_are_proved_by_one_list_and_a_forged_one_still_refused(
    fake: FakeApi,
) -> None:
    count = proofs.LIST_FROM + 20
    ctl, manifests = started(fake, count, forged=7)
    fake.requests.clear()
    why = [await ctl.foreign_render(m, ("Skill", NS, f"s{i}")) for i, m in enumerate(manifests)]
    assert [i for i, w in enumerate(why) if w is not None] == [7]
    assert "sha256" in str(why[7])  # what differs, read from the ConfigMap itself
    assert reads(fake) == (1, 1)  # one LIST for all; the forged one read to say why
    # Proved once: a second round reads nothing.
    again = [await ctl.foreign_render(m, ("Skill", NS, f"s{i}")) for i, m in enumerate(manifests)]
    assert [i for i, w in enumerate(again) if w is not None] == [7]
    assert reads(fake) == (2, 1)


async def test_a_render_replaced_after_the_list_is_read_again(fake: FakeApi) -> None:
    ctl, manifests = started(fake, proofs.LIST_FROM)
    fake.requests.clear()
    assert await ctl.foreign_render(manifests[0], ("Skill", NS, "s0")) is None
    # Deleted and made again by an editor, other content: a new uid, so the LIST's record
    # of the name no longer proves it.
    name = manifests[1]["metadata"]["name"]
    old = fake.get("ConfigMap", NS, name)
    fake.delete("ConfigMap", NS, name)
    new = fake.create({**manifests[1], "data": {"SKILL.md": "# eve\n"}})
    ctl.indexes.apply("configmaps", "DELETED", old)  # the two watch events
    ctl.indexes.apply("configmaps", "ADDED", new)
    assert await ctl.foreign_render(manifests[1], ("Skill", NS, "s1")) is not None
    assert reads(fake) == (1, 1)


async def test_a_few_renders_are_each_read(fake: FakeApi) -> None:
    ctl, manifests = started(fake, 3)
    fake.requests.clear()
    for i, m in enumerate(manifests):
        assert await ctl.foreign_render(m, ("Skill", NS, f"s{i}")) is None
    assert reads(fake) == (3, 0)


async def test_records_no_check_asked_for_in_time_are_dropped(
    fake: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proofs, "KEPT_SECONDS", 0.05)
    ctl, manifests = started(fake, proofs.LIST_FROM)
    fake.requests.clear()
    assert await ctl.foreign_render(manifests[0], ("Skill", NS, "s0")) is None
    await asyncio.sleep(0.2)  # the LIST's unused records are dropped; no second LIST
    assert await ctl.foreign_render(manifests[1], ("Skill", NS, "s1")) is None
    assert reads(fake) == (1, 1)
