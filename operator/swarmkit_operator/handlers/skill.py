"""Skill: render into ``skill-<name>-<hash8>``, pin scripts, fan out to granting Agents."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import kopf

from swarmkit_api.conditions import READY
from swarmkit_api.resources import SKILL

from .. import k8s
from ..builders import ObjectRef
from ..builders.reviewer import SkillFacts
from ..builders.skill import SourceConfigMap, referenced_config_maps, render_skill
from ..builders.trust import foreign_config_map
from ..indexes import IndexId, index
from ..library.records import granted_by_field
from ..reconcile import parking
from ..reconcile.book import Held
from ..reconcile.controller import Controller, Deferred, Kind, Observation
from ..reconcile.status import StatusOf
from ..reconcile.views import MISSING, Key, base_view


def _implementation(body: Any) -> dict[str, Any]:
    spec = body.get("spec") or {}
    impl = spec.get("implementation")
    return impl if isinstance(impl, dict) else {}


def _remote_credential(impl: dict[str, Any]) -> tuple[str, str] | None:
    """(credentialsRef, cardUrl) of a remote agent skill that sends a credential."""
    ref, url = impl.get("credentialsRef"), impl.get("cardUrl")
    if impl.get("type") == "agent" and isinstance(ref, str) and isinstance(url, str):
        return (ref, url)
    return None


def _script_tuples(scripts: Any) -> tuple[tuple[str, str, bool, str], ...]:
    """Scripts' verdicts as a Skill's view keeps them (path, sha256, approved, reason)."""
    return tuple(
        (s.get("path", ""), s.get("sha256", ""), bool(s.get("approved")), s.get("reason", ""))
        for s in scripts or ()
    )


@index("skills", id=IndexId.SKILL_VIEWS)
def skill_views(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    """(namespace, name) → what agents and topologies need of the skill."""
    view = base_view(body)
    impl = _implementation(body)
    status = view["status"]
    composes = impl.get("composes") if impl.get("type") == "composed" else None
    target = impl.get("topology") if impl.get("type") == "agent" else None
    view.update(
        contentHash=status.get("contentHash"),
        renderedConfigMap=status.get("renderedConfigMap"),
        scripts=_script_tuples(status.get("scripts")),
        composes=tuple(c for c in composes or () if isinstance(c, str)),
        target=target if isinstance(target, str) else None,
        # A remote agent skill's credential and where it would send it (builders.agent).
        credential=_remote_credential(impl),
        category=(body.get("spec") or {}).get("category"),
        # For the read-only check of funnel reviewers (builders.reviewer).
        facts=SkillFacts.of(
            body.get("spec") or {}, sum(1 for s in status.get("scripts") or () if s.get("approved"))
        ),
    )
    return {(namespace, name): view}


@index("skills", id=IndexId.SKILL_BY_CONFIG_MAP)
def skill_by_config_map(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, ConfigMap) → skills taking file content from it."""
    return {(namespace, cm): name for cm in referenced_config_maps(body.get("spec") or {})}


@index("skills", id=IndexId.SKILL_BY_COMPONENT)
def skill_by_component(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """(namespace, component skill) → composed skills running it."""
    impl = _implementation(body)
    if impl.get("type") != "composed":
        return {}
    return {(namespace, c): name for c in impl.get("composes") or () if isinstance(c, str)}


@index("skills", id=IndexId.SKILL_BY_TARGET)
def skill_by_target(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    """(namespace, topology) → agent-type skills that run it as a child."""
    impl = _implementation(body)
    target = impl.get("topology") if impl.get("type") == "agent" else None
    return {(namespace, target): name} if isinstance(target, str) else {}


def dependents_view(view: dict[str, Any] | None) -> Any:
    if view is None:
        return MISSING
    return (
        view["contentHash"],
        view["renderedConfigMap"],
        view["ready"],
        view["reason"],
        view["scripts"],
        view["composes"],
        view["target"],
        view["category"],  # the EvalSets judging with it check it is a decision skill
        view["observed"] == view["generation"],
    )


def granting_agents(ctl: Controller, namespace: str, skill: str) -> set[str]:
    """Agents granting ``skill`` directly or through composed skills that run it."""
    agents: set[str] = set()
    seen: set[str] = set()
    stack = [skill]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        agents.update(ctl.lookup_all(IndexId.AGENT_BY_GRANT, (namespace, current)))
        stack.extend(ctl.lookup_all(IndexId.SKILL_BY_COMPONENT, (namespace, current)))
    return agents


def dependents(
    ctl: Controller, namespace: str, name: str, seen: Observation, _body: Mapping[str, Any]
) -> None:
    """The Agents granting the Skill (directly or through composed skills). (The Funnels
    and EvalSets judging with it declare their own watch of it: ``funnel.KIND.watches``,
    ``evaluation.EVAL_SET_KIND.watches``.)"""
    if seen.changed:
        ctl.enqueue_many("Agent", namespace, granting_agents(ctl, namespace, name))
        ctl.enqueue_gc(namespace)


async def read_sources(namespace: str, names: set[str]) -> dict[str, SourceConfigMap | None]:
    """The user ConfigMaps a spec takes content from (None where missing)."""
    ordered = sorted(names)
    found = await asyncio.gather(*(k8s.read_config_map(namespace, n) for n in ordered))
    out: dict[str, SourceConfigMap | None] = {}
    for cm_name, cm in zip(ordered, found, strict=True):
        out[cm_name] = (
            None
            if cm is None
            else SourceConfigMap(cm.get("data") or {}, cm.get("binaryData") or {})
        )
    return out


async def _render(ctl: Controller, key: Key, body: Mapping[str, Any]) -> tuple[Held, bool]:
    """The Skill's render, its ConfigMaps ensured: (what its status will say, whether a
    ConfigMap was created)."""
    _, namespace, name = key
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    owner = ObjectRef("Skill", name, namespace, str(meta.get("uid", "")))
    sources = await read_sources(namespace, referenced_config_maps(spec))
    render = render_skill(owner, spec, sources, ctl.config)
    created = False
    # A large skill's parts first, its revision's ConfigMap (which lists them) last: a
    # revision that exists is complete. Each is adopted only if it is the render.
    for manifest in (*render.parts, render.config_map):
        if manifest is None:
            break
        made = await ctl.ensure_config_map(manifest)
        created = created or made
        # A ConfigMap under the render's name that this process did not just create may be
        # anyone's (built-in edit creates ConfigMaps): adopted only if it is the render.
        foreign = None if made else await ctl.foreign_render(manifest, key)
        if foreign is not None:
            if manifest is not render.config_map:  # a part: say which
                foreign = f"its part ConfigMap {manifest['metadata']['name']}: {foreign}"
            render = foreign_config_map(render, "Skill", name, foreign)
            break
    fields = render.status_fields()
    generation = int(meta.get("generation", 0))
    ready = next((v for v in render.verdicts if v.type == READY), None)
    # What an Agent granting it reads while its status write is held (reconcile.parking).
    view = {
        "contentHash": fields.get("contentHash"),
        "renderedConfigMap": fields.get("renderedConfigMap"),
        "scripts": _script_tuples(fields.get("scripts")),
        "ready": ready is not None and ready.status == "True",
        "reason": ready.reason if ready is not None else "",
        "observed": generation,
    }
    held = Held(owner.uid, generation, time.monotonic(), fields, tuple(render.verdicts), view)
    return held, created


async def reconcile_skill(ctl: Controller, namespace: str, name: str, force: bool) -> str:
    key = ("Skill", namespace, name)
    body = ctl.book.bodies.pop(key, None)
    view = ctl.lookup(IndexId.SKILL_VIEWS, (namespace, name))
    if view is None:
        ctl.book.held.pop(key, None)
        return "gone"
    render, created = parking.current(ctl, key, view), False
    if render is None:
        if body is None:
            body = await k8s.get_custom("skills", namespace, name)
            if body is None:
                return "gone"
        render, created = await _render(ctl, key, body)
    # The index is at least as fresh as the body (it is updated on every event).
    current = view["status"] if view["uid"] == render.uid else (body or {}).get("status") or {}
    # Never written yet, and a bulk apply is arriving: the Agents granting it may be in it.
    if not current.get("observedGeneration") and parking.hold(ctl, key, render):
        return "changed" if created else "held"
    fields = {
        **render.fields,
        "grantedBy": granted_by_field(granting_agents(ctl, namespace, name)),
    }
    usage = ctl.services.skill_usage
    if usage is not None:  # the library's: rides along (its flush skips a pending Skill)
        fields["usage"] = usage(namespace, name)
    written = await ctl.write_status(
        StatusOf("Skill", namespace, name, render.uid, render.generation, current),
        fields,
        render.verdicts,
    )
    if render.fields.get("renderedConfigMap") != current.get("renderedConfigMap"):
        ctl.enqueue_gc(namespace)
    return "changed" if written or created else "unchanged"


async def reconcile_skill_grants(ctl: Controller, namespace: str, name: str, force: bool) -> str:
    """Only ``status.grantedBy``, after an Agent's grants changed (no render, no GET)."""
    view = ctl.lookup(IndexId.SKILL_VIEWS, (namespace, name))
    if view is None:
        return "gone"
    key: Key = ("Skill", namespace, name)
    if parking.is_held(ctl, key, view):
        return "held"  # its first status write is held: it reads grantedBy when it is made
    # Written already and a bulk apply arriving: more of its Agents may be in it. One write
    # once it pauses, not one per Agent as they arrive (reconcile/parking.py).
    pause = parking.pause_in(ctl, namespace)
    if pause is not None and not force:
        ctl.enqueue("SkillGrants", namespace, name, delay=pause)
        return "held"
    # A Skill reconcile that is queued, running or not yet echoed by the watch may write a
    # grantedBy computed before this Agent's grants were indexed (a Skill created just
    # before the Agents granting it): look again once its write is visible. Checked before
    # "never reconciled", because that write is exactly what a first reconcile makes.
    if ctl.pending(key, view) and not force:
        raise Deferred([key])
    if view["observed"] is None:
        return "gone"  # never reconciled, nothing on its way: its reconcile writes grantedBy
    fields = {"grantedBy": granted_by_field(granting_agents(ctl, namespace, name))}
    # Its own field manager: a SkillGrants write owns grantedBy only (the Skill reconcile
    # applies grantedBy too, with everything else; force hands it back and forth).
    written = await ctl.write_status(
        StatusOf("Skill", namespace, name, view["uid"], int(view["observed"]), view["status"]),
        fields,
        (),
        manager=k8s.SKILL_GRANTS_MANAGER,
    )
    return "changed" if written else "unchanged"


KIND = Kind(
    "Skill",
    priority=1,  # after the Workspaces, before the Agents granting it
    reconcile=reconcile_skill,
    api=SKILL,
    indexes=(skill_views, skill_by_config_map, skill_by_component, skill_by_target),
    dependents_view=dependents_view,
    dependents=dependents,
    keep_body=True,  # the render reads the whole spec: no GET
)
#: A Skill's ``status.grantedBy`` alone, after an Agent's grants changed (ranks with Skills).
GRANTS = Kind("SkillGrants", priority=1, reconcile=reconcile_skill_grants)
