"""Decoding the API's JSON whatever an object holds (issue 47 item 1): a value nested too
deep for Python's decoder is cut, the object marked with the fields cut, and every other
object of the same answer decoded whole."""

from __future__ import annotations

import json

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
