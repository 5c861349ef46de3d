"""Decoding the API's JSON whatever an object holds (issue 47 item 1): a value nested too
deep for Python's decoder is cut, the object marked with the fields cut, and every other
object of the same answer decoded whole."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from swarmkit_api import decoding


def deep_skill(name: str, levels: int) -> str:
    # Built as text: json.dumps itself cannot encode what json.loads cannot decode.
    inner = '{"type": "string", "description": "a ] and a { and a \\" in a string"}'
    nested = '{"properties": {"a": ' * levels + inner + "}}" * levels
    return (
        '{"apiVersion": "swarmkit.io/v1alpha1", "kind": "Skill", '
        f'"metadata": {{"name": "{name}", "uid": "u-{name}"}}, '
        f'"spec": {{"description": "d", "outputs": {nested}}}}}'
    )


def test_python_cannot_decode_the_poison_skill_of_the_issue() -> None:
    try:
        json.loads(deep_skill("poison", 2000))
    except RecursionError:
        return
    raise AssertionError("json.loads decoded 2,000 levels: the test no longer shows the fault")


def test_a_too_deep_object_is_decoded_cut_and_names_the_field() -> None:
    body = decoding.loads(deep_skill("poison", 2000))
    assert body["metadata"]["name"] == "poison"
    [cut] = decoding.too_deep(body)
    assert cut.startswith("spec.outputs.properties.a.properties.a")
    assert cut.count(".properties.a") < decoding.MAX_DEPTH


def test_a_list_marks_only_the_deep_item() -> None:
    text = (
        '{"kind": "SkillList", "metadata": {"resourceVersion": "7"}, "items": ['
        + deep_skill("poison", 2000)
        + ", "
        + deep_skill("fine", 3)
        + "]}"
    )
    listing = decoding.loads(text)
    poison, fine = listing["items"]
    assert decoding.too_deep(poison) and not decoding.too_deep(fine)
    assert fine["spec"]["outputs"]["properties"]["a"]["properties"]["a"]["properties"]["a"] == {
        "type": "string",
        "description": 'a ] and a { and a " in a string',
    }
    assert listing["metadata"]["resourceVersion"] == "7"


def test_a_watch_event_marks_its_object() -> None:
    event = decoding.loads('{"type": "ADDED", "object": ' + deep_skill("poison", 2000) + "}")
    assert event["type"] == "ADDED"
    assert decoding.too_deep(event["object"])
    assert decoding.TOO_DEEP not in event


def test_an_ordinary_answer_is_json_loads() -> None:
    text = deep_skill("fine", 50)
    assert decoding.loads(text) == json.loads(text)
    assert decoding.too_deep(decoding.loads(text)) == []


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab{}[]"\\:,é\n '),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet='ab{}[]"\\é', max_size=4), inner, max_size=4)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(value=JSON, depth=st.integers(min_value=1, max_value=6))
def test_pruning_keeps_every_value_within_the_depth_and_cuts_the_rest(
    value: Any, depth: int
) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert json.loads(decoding.pruned(text, 1000)) == value  # nothing that deep: unchanged
    cut = json.loads(decoding.pruned(text, depth))  # always JSON, whatever the strings hold
    body = {"spec": cut}
    decoding._mark(body)
    assert bool(decoding.too_deep(body)) == (_depth(value) > depth)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0
