"""A kind's spec nests at most MAX_SPEC_DEPTH levels; deeper is refused naming the field."""

from __future__ import annotations

import pytest

from swarmkit_api.base import MAX_SPEC_DEPTH, deepest
from swarmkit_api.skill import SkillSpec


def test_deepest_names_the_path_and_needs_no_recursion() -> None:
    value: dict[str, object] = {"ok": 1}
    cur = value
    for _ in range(5000):
        nxt: dict[str, object] = {}
        cur["n"] = [nxt]
        cur = nxt
    depth, path = deepest(value)
    assert depth == 10001 and path.startswith("spec.n[0].n[0]")


def test_a_spec_past_the_limit_is_refused_naming_the_field() -> None:
    schema: dict[str, object] = {"type": "string"}
    for _ in range(MAX_SPEC_DEPTH):
        schema = {"type": "object", "properties": {"a": schema}}
    with pytest.raises(
        ValueError, match=r"spec\.outputs nests \d+ levels deep, over the limit of 64"
    ):
        SkillSpec.model_validate({"category": "capability", "description": "d", "outputs": schema})
