"""A Skill adopts a ConfigMap bearing its render's name only if it is the render (issue 46).

Built-in ``edit`` creates ConfigMaps, and a render's name follows from its content, so an
editor can create ``skill-<name>-<hash8>`` before the operator does. The Skill reconcile
reads back what it did not create itself and compares it with its render: a foreign one
leaves the Skill ``Ready=False TamperedObject`` naming it (with a Warning Event) and
nothing an Agent could pin; deleting it re-queues the Skill, which then renders its own.
Its own render is read back once per uid, not on every reconcile.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from swarmkit_operator.builders import ObjectRef
from swarmkit_operator.builders.skill import render_skill
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.handlers.common import config_map_event
from swarmkit_operator.handlers.root import wiring
from swarmkit_operator.handlers.skill import reconcile_skill
from tests.support.fake_k8s import FakeApi

from .test_render_adoption import Api

WIRED = wiring()
NS = "team-a"
SPEC: dict[str, Any] = {
    "description": "Use when an incident is reported.",
    "category": "capability",
    "instructions": "# Triage\n",
    "provenance": {"authoredBy": "human", "version": "1.0.0"},
}
BODY = {
    "kind": "Skill",
    "metadata": {"uid": "skill-uid", "name": "triage", "namespace": NS, "generation": 1},
    "spec": SPEC,
}
RENDER = render_skill(ObjectRef("Skill", "triage", NS, "skill-uid"), SPEC, {}, OperatorConfig())
assert RENDER.config_map is not None
NAME = str(RENDER.config_map_name)


def ready(status: Mapping[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Ready")


def controller() -> Any:
    ctl = WIRED.controller(OperatorConfig())
    ctl.indexes.update("skills", BODY)
    ctl.book.bodies[("Skill", NS, "triage")] = copy.deepcopy(BODY)
    return ctl


def labelled(data: Mapping[str, str], uid: str, immutable: bool = True) -> dict[str, Any]:
    assert RENDER.config_map is not None
    meta = {**RENDER.config_map["metadata"], "uid": uid}
    return {**RENDER.config_map, "metadata": meta, "data": dict(data), "immutable": immutable}


async def test_a_forged_render_is_refused_naming_it_and_its_deletion_requeues_the_skill(
    fake: FakeApi,
) -> None:
    assert RENDER.config_map is not None
    forged = labelled({**RENDER.config_map["data"], "SKILL.md": "eve's instructions"}, "eve-uid")
    api = Api(fake, BODY, NAME, forged)
    ctl = controller()
    ctl.indexes.update("configmaps", api.existing)  # it carries the operator's labels, too
    await reconcile_skill(ctl, NS, "triage", False)
    [status] = api.statuses
    cond = ready(status)
    assert (cond["status"], cond["reason"]) == ("False", "TamperedObject")
    assert cond["message"].startswith(f"ConfigMap {NAME} bears the name of Skill triage's")
    assert status.get("renderedConfigMap") is None and status.get("contentHash") is None
    _, type_, reason, message = ctl.events.get_nowait()
    assert (type_, reason) == ("Warning", "TamperedObject") and NAME in message

    # eve deletes it (metadata-only watch event, labels or not): the Skill is queued again
    app = SimpleNamespace(controller=ctl)
    await config_map_event(
        type="DELETED", body=forged, namespace=NS, name=NAME, uid="eve-uid", labels={}, app=app
    )
    assert ctl.queue.pending(("Skill", NS, "triage"))
    assert (NS, NAME) not in ctl.renders.foreign


async def test_the_operators_own_render_is_adopted_and_read_back_once_per_uid(
    fake: FakeApi,
) -> None:
    assert RENDER.config_map is not None
    own = labelled(RENDER.config_map["data"], "own-uid")
    api = Api(fake, BODY, NAME, own)
    ctl = controller()
    ctl.indexes.update("configmaps", api.existing)
    await reconcile_skill(ctl, NS, "triage", False)
    cond = ready(api.statuses[-1])
    assert (cond["status"], cond["reason"]) == ("True", "Rendered")
    assert api.statuses[-1]["renderedConfigMap"] == NAME
    ctl.book.bodies[("Skill", NS, "triage")] = copy.deepcopy(BODY)
    await reconcile_skill(ctl, NS, "triage", False)
    assert api.reads == 1, "an immutable ConfigMap of a verified uid is not read again"


async def test_the_right_bytes_in_a_mutable_config_map_are_not_adopted(
    fake: FakeApi,
) -> None:
    assert RENDER.config_map is not None
    api = Api(fake, BODY, NAME, labelled(RENDER.config_map["data"], "eve-uid", immutable=False))
    ctl = controller()
    await reconcile_skill(ctl, NS, "triage", False)
    cond = ready(api.statuses[-1])
    assert cond["reason"] == "TamperedObject" and "it is not immutable" in cond["message"]


async def test_a_foreign_config_map_deleted_before_the_read_back_is_replaced_by_the_render(
    fake: FakeApi,
) -> None:
    """The 409 came from a ConfigMap deleted since (eve's, removed to recover): the render
    is written then, not taken as present, so the Skill never names a missing render."""
    api = Api(fake, BODY, NAME, None)
    # The reconcile's own create: eve's ConfigMap was still there; it is gone by the read.
    fake.refuse("POST", r"/namespaces/team-a/configmaps$", status=409)
    ctl = controller()
    await reconcile_skill(ctl, NS, "triage", False)
    posts = [p for verb, p in fake.requests if verb == "POST" and p.endswith("/configmaps")]
    assert len(posts) == 2 and fake.get("ConfigMap", NS, NAME) is not None
    cond = ready(api.statuses[-1])
    assert (cond["status"], cond["reason"]) == ("True", "Rendered")
