"""kopf settings that rely on how the handlers are written."""

from __future__ import annotations

import kopf

import swarmkit_operator.handlers  # noqa: F401 - registers every handler
from swarmkit_operator.handlers.common import EventOnlyDiffBase


def test_no_handler_reacts_to_changes_so_the_diff_base_can_stay_empty() -> None:
    # EventOnlyDiffBase gives kopf an empty essence for every event; a change handler
    # (on.create/update/resume/delete, daemons, timers) would need a real one.
    registry = kopf.get_default_registry()
    assert registry._changing.get_all_handlers() == []
    assert registry._spawning.get_all_handlers() == []
    assert registry._watching.get_all_handlers()  # the handlers are registered at all
    assert EventOnlyDiffBase(field="status.kopf.x").build(body={"spec": {"a": 1}}) == {}
