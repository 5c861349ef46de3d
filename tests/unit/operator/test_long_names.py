"""Every name the apiserver accepts works (issue 47 item 5): a name of 64-253 characters
gives rendered ConfigMaps, labels and derived names the apiserver accepts, and two long
names sharing a prefix stay apart."""

from __future__ import annotations

import re

import pytest

from swarmkit_operator.builders import ObjectRef, config_map_name, rendered_labels
from swarmkit_operator.builders.job import is_valid_label
from swarmkit_operator.builders.review import build_skill_review
from swarmkit_operator.builders.workspace import render_workspace
from swarmkit_operator.hashing import fitted, label_value

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
#: Valid names of the lengths the issue tried: 64, 100 and 253 characters.
LONG = [
    "a" * 64,
    "team-" + "x" * 95,
    ".".join(["b" * 63, "c" * 63, "d" * 63, "e" * 61]),
]


def valid_labels(labels: dict[str, str]) -> bool:
    return all(is_valid_label(k, v) for k, v in labels.items())


@pytest.mark.parametrize("name", LONG)
@pytest.mark.parametrize("kind", ["Workspace", "Skill", "Agent"])
def test_rendered_config_maps_of_a_long_name_are_valid(kind: str, name: str) -> None:
    assert len(name) <= 253 and DNS_SUBDOMAIN.match(name)
    owner = ObjectRef(kind, name, "ns", "uid-1")
    assert valid_labels(rendered_labels(owner))
    cm = config_map_name(owner, "0123456789abcdef")
    assert len(cm) <= 253 and DNS_SUBDOMAIN.match(cm), cm
    assert cm.endswith("-01234567")


def test_a_workspace_of_253_characters_renders_with_valid_labels() -> None:
    owner = ObjectRef("Workspace", LONG[2], "ns", "uid-1")
    render = render_workspace(owner, {}, {}, {})
    assert render.config_map is not None
    meta = render.config_map["metadata"]
    assert valid_labels(meta["labels"])
    assert len(meta["name"]) <= 253 and DNS_SUBDOMAIN.match(meta["name"])


def test_long_names_sharing_a_prefix_stay_apart() -> None:
    one, two = "p" * 250 + "one", "p" * 250 + "two"
    assert label_value(one) != label_value(two)
    assert fitted(one, 63) != fitted(two, 63) and len(fitted(one, 63)) == 63
    a = config_map_name(ObjectRef("Skill", one, "ns", "u"), "d" * 8)
    b = config_map_name(ObjectRef("Skill", two, "ns", "u"), "d" * 8)
    assert a != b


def test_a_skill_review_of_a_long_skill_has_valid_labels() -> None:
    review = build_skill_review("ns", LONG[2], "uid-s", "f" * 64, "a description")
    assert valid_labels(review["metadata"]["labels"])
    assert len(review["metadata"]["name"]) <= 63
