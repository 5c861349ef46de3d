"""Each watched resource has one dispatcher that calls every handler module's function for
it, in the order the modules are imported; one that raises does not stop the others. Those
resources are not kopf's to watch (``swarmkit_operator.watching`` is)."""

from __future__ import annotations

import logging
from typing import Any

import kopf
import pytest

import swarmkit_operator.handlers  # noqa: F401  (registers every handler)
from swarmkit_api import GROUP, VERSION
from swarmkit_operator.handlers import events


def names(plural: str) -> list[str]:
    return [
        f"{fn.__module__.rsplit('.', 1)[1]}.{fn.__name__}"
        for fn in events.registered(GROUP, VERSION, plural)
    ]


def test_skill_and_agent_events_reach_every_module_through_one_dispatcher() -> None:
    assert names("skills") == [
        "gateway.gateways_on_dependency_event",
        "review.skill_review_needed",
        "run.runs_on_target_event",
        "library.library_skill_event",  # skill.py imports library.py: registered first
        "skill.skill_event",
    ]
    assert names("agents") == [
        "agent.agent_event",
        "gateway.gateways_on_agent_event",
        "run.runs_on_target_event",
        "library.library_agent_event",
    ]
    registry = kopf.get_default_registry()
    for plural in ("skills", "agents", "topologies", "workspaces", "runs"):
        assert events.dispatcher(GROUP, VERSION, plural) is not None
        resource = kopf.Resource(GROUP, VERSION, plural)
        handlers = [
            h
            for h in registry._watching.get_all_handlers()
            if h.selector is not None and h.selector.check(resource) and not h.labels
        ]
        assert handlers == [], f"kopf would watch {plural} too: {[h.id for h in handlers]}"


def test_config_maps_are_watched_as_metadata_and_the_rest_whole() -> None:
    assert (GROUP, VERSION, "skills") in events.resources()
    assert ("v1", "configmaps") in events.resources()
    assert events.metadata_only("v1", "configmaps")
    # The workspace handler reads which keys a Secret has; skills need their spec.
    assert not events.metadata_only("v1", "secrets")
    assert not events.metadata_only(GROUP, VERSION, "skills")


def test_one_function_reading_the_body_makes_the_whole_stream_full() -> None:
    @events.on_event("example.dev", "v1", "gadgets", metadata_only=True)
    async def names_only(name: str, **_: Any) -> None:
        return None

    assert events.metadata_only("example.dev", "v1", "gadgets")

    @events.on_event("example.dev", "v1", "gadgets")
    async def reads_spec(spec: Any, **_: Any) -> None:
        return None

    assert not events.metadata_only("example.dev", "v1", "gadgets")


async def test_a_function_that_raises_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    @events.on_event("example.dev", "v1", "widgets")
    async def first(name: str, **_: Any) -> None:
        seen.append(f"first {name}")
        raise RuntimeError("boom")

    @events.on_event("example.dev", "v1", "widgets")
    async def second(name: str, type: str, **_: Any) -> None:
        seen.append(f"second {name} {type}")

    dispatch = events.dispatcher("example.dev", "v1", "widgets")
    assert dispatch is not None
    with caplog.at_level(logging.ERROR, logger="swarmkit_operator.handlers"):
        await dispatch(name="w1", namespace="ns", type="ADDED", body={})
    assert seen == ["first w1", "second w1 ADDED"]
    assert "first on widgets ns/w1 failed" in caplog.text and "boom" in caplog.text
