"""Index ids are typed (issue 37, N8 of the structure review).

Every index is named by an :class:`~swarmkit_operator.indexes.IndexId` member, declared by
one ``@index`` function, and read through the member. A name that is no member fails
where it is written; two functions under one name and a ``Watch`` through an index
nothing wired declares fail at start-up (the wiring). Before, each of these was a string
accepted as it came: the first function silently kept, the lookup failing (or empty) only
when an event arrived.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any

import pytest

from swarmkit_operator.handlers import funnel, root
from swarmkit_operator.indexes import Indexes, IndexId, IndexSpec, UnknownIndex, index
from swarmkit_operator.reconcile.controller import Watch


def test_every_index_id_is_declared_by_exactly_one_wired_function() -> None:
    """No member without its function, none declared twice (the wiring would refuse it)."""
    specs = root.wiring().index_specs
    assert sorted(s.id for s in specs) == sorted(IndexId)


def test_an_index_name_that_is_no_member_is_refused_where_it_is_declared() -> None:
    with pytest.raises(ValueError, match="skill_veiws"):
        index("skills", id="skill_veiws")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="by_grant"):
        IndexSpec("by_grant", "agents", lambda **_: {})  # type: ignore[arg-type]
    # A string that is a member is that member (what logs and the keys read).
    assert IndexSpec("skill_views", "skills", lambda **_: {}).id is IndexId.SKILL_VIEWS  # type: ignore[arg-type]


def test_reading_an_index_these_indexes_were_not_built_with_names_it() -> None:
    indexes = Indexes([IndexSpec(IndexId.SKILL_VIEWS, "skills", lambda **_: {})])
    assert indexes.values(IndexId.SKILL_VIEWS, ("ns", "s")) == []  # wired, empty: an answer
    for read in (
        lambda: indexes.values(IndexId.AGENT_VIEWS, ("ns", "a")),
        lambda: indexes.first(IndexId.AGENT_VIEWS, ("ns", "a")),
        lambda: indexes.keys(IndexId.AGENT_VIEWS),
        lambda: indexes.view(IndexId.AGENT_VIEWS),
    ):
        with pytest.raises(UnknownIndex, match="no index agent_views is wired"):
            read()


def test_two_functions_declaring_one_index_are_a_start_up_error() -> None:
    second = ModuleType("swarmkit_second_views")

    @index("skills", id=IndexId.SKILL_VIEWS)
    def other_skill_views(**_: Any) -> dict[Any, Any]:
        return {}

    other_skill_views.__module__ = second.__name__
    second.other_skill_views = other_skill_views  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="two functions declare the index skill_views"):
        root.wiring(modules=(*root.MODULES, second))


def test_a_watch_through_an_index_no_wired_module_declares_is_a_start_up_error() -> None:
    """The promotions' Review index is declared by ``handlers/promotion.py``: a kind that
    watches through it in a wiring without that module fails at start-up, not on the first
    Skill event."""
    odd = dataclasses.replace(funnel.KIND, watches=(Watch("Skill", IndexId.PROMOTION_REVIEWS),))
    kinds = tuple(odd if k is funnel.KIND else k for k in root.KINDS)
    modules = (*root.SHARED, *root.kind_modules(kinds))
    with pytest.raises(RuntimeError, match="Funnel watches Skill through promotion_reviews"):
        root.wiring(modules=modules, kinds=kinds)
    root.wiring(modules=(*modules, root.promotion), kinds=kinds)  # declared: wired
