"""k8s.decoding: a body too deep for Python's decoder is cut and marked, the rest decodes."""

from __future__ import annotations

import json

import pytest

from swarmkit_api.base import MAX_SPEC_DEPTH, deepest
from swarmkit_api.skill import SkillSpec
from swarmkit_operator.k8s.decoding import CUT_VALUE, loads, loads_bounded, undecodable

PLAIN = [
    {"a": [1, 2, {"b": None, "c": 'x"y\\n}]', "d": []}], "e": {}, "f": -1.5e3, "g": True},
    [],
    {},
    "text",
    3,
    [[[]]],
    {"k": [{"x": [1, {"y": "}]"}]}]},
]


@pytest.mark.parametrize("doc", PLAIN)
def test_the_fallback_decodes_what_json_decodes(doc: object) -> None:
    for text in (json.dumps(doc), json.dumps(doc, indent=2)):
        assert loads_bounded(text) == doc


def _object(name: str, spec: str) -> str:
    meta = json.dumps({"name": name, "namespace": "team-a"})
    return (
        f'{{"apiVersion":"swarmkit.dev/v1alpha1","kind":"Skill","metadata":{meta},"spec":{spec}}}'
    )


def test_a_poison_item_is_cut_and_marked_and_its_neighbours_decode_in_full() -> None:
    deep = '{"outputs":' + '{"a":' * 3000 + "1" + "}" * 3000 + "}"
    fine = _object("fine", '{"x":[1,2]}')
    items = f"[{fine},{_object('poison', deep)},{fine}]"
    text = (
        f'{{"apiVersion":"v1","items":{items},"kind":"List","metadata":{{"resourceVersion":"7"}}}}'
    )
    with pytest.raises(RecursionError):
        json.loads(text)
    listed = loads(text)
    first, poison, last = listed["items"]
    assert first == last == json.loads(fine)
    assert undecodable(first) is None and listed["metadata"] == {"resourceVersion": "7"}
    assert undecodable(poison) == "spec.outputs nests deeper than 200 levels"
    assert poison["metadata"]["name"] == "poison"
    assert CUT_VALUE in json.dumps(poison)


def test_a_watch_event_marks_its_object() -> None:
    deep = '{"outputs":' + "[" * 2500 + "]" * 2500 + "}"
    event = loads('{"type":"MODIFIED","object":' + _object("p", deep) + "}")
    assert event["type"] == "MODIFIED"
    assert undecodable(event["object"]) == "spec.outputs nests deeper than 200 levels"


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
