"""kopf settings that rely on how the handlers are written."""

from __future__ import annotations

import kopf

import swarmkit_operator.handlers  # noqa: F401 - registers the root's kopf handlers
from swarmkit_operator.handlers import root
from swarmkit_operator.handlers.common import EventOnlyDiffBase


def test_no_handler_reacts_to_changes_so_the_diff_base_can_stay_empty() -> None:
    # EventOnlyDiffBase gives kopf an empty essence for every event; a change handler
    # (on.create/update/resume/delete, daemons, timers) would need a real one.
    registry = kopf.get_default_registry()
    assert registry._changing.get_all_handlers() == []
    assert registry._spawning.get_all_handlers() == []
    # The handlers are registered at all: every watch is the operator's own stream now
    # (handlers/events.py), kopf watches nothing (test_rbac_table.py checks that).
    assert registry._watching.get_all_handlers() == []
    assert len(root.wiring().events.streams()) >= 10
    # One start-up handler builds everything, in its written order (handlers/root.py).
    startup = [
        h.fn for h in registry._activities.get_all_handlers() if h.activity.value == "startup"
    ]
    assert startup == [root.start]
    assert EventOnlyDiffBase(field="status.kopf.x").build(body={"spec": {"a": 1}}) == {}
