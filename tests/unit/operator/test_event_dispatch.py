"""Each watched stream has one dispatcher that calls every handler module's function for
it, in the order the composition root names the modules (not their import order); one
that raises does not stop the others. Those resources are not kopf's to watch
(``swarmkit_operator.watching`` is)."""

from __future__ import annotations

import logging
from typing import Any

import kopf
import pytest

import swarmkit_operator.handlers  # noqa: F401  (registers the root's kopf handlers)
from swarmkit_api import GROUP, VERSION
from swarmkit_operator.handlers import events, root

WIRED = root.wiring()


def names(plural: str) -> list[str]:
    return [
        f"{fn.__module__.rsplit('.', 1)[1]}.{fn.__name__}"
        for fn in WIRED.events.registered(GROUP, VERSION, plural)
    ]


def test_skill_and_agent_events_reach_every_module_through_one_dispatcher() -> None:
    # The kind module first: it updates the indexes the others' kicks lead to reading.
    assert names("skills") == [
        "skill.skill_event",
        "review.skill_review_needed",
        "run.runs_on_target_event",
        "gateway.gateways_on_dependency_event",
        "library.library_skill_event",
    ]
    assert names("agents") == [
        "agent.agent_event",
        "run.runs_on_target_event",
        "gateway.gateways_on_agent_event",
        "library.library_agent_event",
    ]
    registry = kopf.get_default_registry()
    for plural in ("skills", "agents", "topologies", "workspaces", "runs"):
        assert WIRED.events.dispatcher(GROUP, VERSION, plural) is not None
        resource = kopf.Resource(GROUP, VERSION, plural)
        handlers = [
            h
            for h in registry._watching.get_all_handlers()
            if h.selector is not None and h.selector.check(resource) and not h.labels
        ]
        assert handlers == [], f"kopf would watch {plural} too: {[h.id for h in handlers]}"


def test_config_maps_are_watched_as_metadata_and_the_rest_whole() -> None:
    assert (GROUP, VERSION, "skills") in WIRED.events.resources()
    assert ("v1", "configmaps") in WIRED.events.resources()
    assert WIRED.events.metadata_only("v1", "configmaps")
    # Skills need their spec. Secrets are not watched at all (issue 41: no verb on them).
    assert not WIRED.events.metadata_only(GROUP, VERSION, "skills")
    assert ("v1", "secrets") not in WIRED.events.resources()


def test_one_function_reading_the_body_makes_the_whole_stream_full() -> None:
    registry = events.EventRegistry()
    gadgets: events.Stream = (("example.dev", "v1", "gadgets"), "")

    async def names_only(name: str, **_: Any) -> None:
        return None

    registry.add(gadgets, names_only, metadata_only=True)
    assert registry.metadata_only("example.dev", "v1", "gadgets")

    async def reads_spec(spec: Any, **_: Any) -> None:
        return None

    registry.add(gadgets, reads_spec)
    assert not registry.metadata_only("example.dev", "v1", "gadgets")


def test_marking_a_function_registers_nothing_until_the_root_collects_it() -> None:
    @events.on_event("example.dev", "v1", "gizmos")
    async def gizmo(name: str, **_: Any) -> None:
        return None

    # Not in the operator's wiring: no module the root names defines it.
    assert root.wiring().events.registered("example.dev", "v1", "gizmos") == []
    assert ("example.dev", "v1", "gizmos") not in root.wiring().events.resources()


def test_every_module_with_marked_functions_is_one_the_root_names() -> None:
    """A marked function in a module the root does not name would never run: a new
    handler module must be added to ``root.MODULES`` (in the order its functions run)."""
    import importlib
    import pkgutil

    import swarmkit_operator
    from swarmkit_operator.marks import marked

    unnamed = []
    for info in pkgutil.walk_packages(swarmkit_operator.__path__, "swarmkit_operator."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        if any(True for _ in marked(module)) and module not in root.MODULES:
            unnamed.append(info.name)
    assert unnamed == []


async def test_a_function_that_raises_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []
    registry = events.EventRegistry()
    widgets: events.Stream = (("example.dev", "v1", "widgets"), "")

    async def first(name: str, **_: Any) -> None:
        seen.append(f"first {name}")
        raise RuntimeError("boom")

    async def second(name: str, type: str, **_: Any) -> None:
        seen.append(f"second {name} {type}")

    registry.add(widgets, first)
    registry.add(widgets, second)
    dispatch = registry.dispatcher("example.dev", "v1", "widgets")
    assert dispatch is not None
    with caplog.at_level(logging.ERROR, logger="swarmkit_operator.handlers"):
        await dispatch(name="w1", namespace="ns", type="ADDED", body={})
    assert seen == ["first w1", "second w1 ADDED"]
    assert "first on widgets ns/w1 failed" in caplog.text and "boom" in caplog.text
