"""Every name the apiserver accepts works (issue 47 item 5): a name of 64-253 characters
gives rendered ConfigMaps, labels and derived names the apiserver accepts, and two long
names sharing a prefix stay apart."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from swarmkit_api.effects import object_name
from swarmkit_operator.builders import ObjectRef, config_map_name, rendered_labels
from swarmkit_operator.builders import job as jobs
from swarmkit_operator.builders import review as rv
from swarmkit_operator.builders.gateway import gateway_name
from swarmkit_operator.builders.job import is_valid_label
from swarmkit_operator.builders.review import build_skill_review
from swarmkit_operator.builders.serve import serve_name
from swarmkit_operator.builders.spend import hold_review_name
from swarmkit_operator.builders.workspace import render_workspace
from swarmkit_operator.hashing import dns_label, fitted, label_value
from swarmkit_operator.runs.schedule import scheduled_run_name

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
    render = render_workspace(owner, {}, {})
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


# --- every derived name, for the longest name each kind admits (issue 47 item 5) ----------


DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: The longest name of a kind whose metadata.name is a kebab DNS label (Skill, Agent,
#: Topology, Funnel: 63) and two that share all but the last character.
KEBAB_63 = ("k" * 62 + "a", "k" * 62 + "b")
#: The same for a kind whose name is a DNS subdomain (Workspace, Run, SpendQuota: 253).
SUBDOMAIN_253 = (LONG[2][:-1] + "a", LONG[2][:-1] + "b")
UID = "0a1b2c3d-0000-4000-8000-000000000001"
WHEN = datetime(2026, 12, 5, 19, 0, tzinfo=UTC)


def _label(name: str, limit: int = 63) -> str:
    assert len(name) <= limit and DNS_LABEL.match(name), (len(name), name)
    return name


def _subdomain(name: str) -> str:
    assert len(name) <= 253 and DNS_SUBDOMAIN.match(name), (len(name), name)
    return name


@pytest.mark.parametrize(
    ("kind", "derive"),
    [
        ("Agent: gateway Deployment/Service", lambda n: _label(gateway_name(n))),
        ("Agent: gateway bundle", lambda n: _label(dns_label(f"gw-{n}", "-0123abcd"))),
        ("Topology: serve Deployment/Service", lambda n: _label(serve_name(n), 54)),
        ("Topology: scheduled Run", lambda n: _label(scheduled_run_name(n, WHEN))),
        ("Skill: review", lambda n: _label(rv.skill_review_name(n, "f" * 64))),
        (
            "Skill: rendered",
            lambda n: _subdomain(config_map_name(ObjectRef("Skill", n, "s", "u"), "d" * 8)),
        ),
    ],
)
def test_a_63_character_name_gives_valid_distinct_derived_names(kind: str, derive: Any) -> None:
    one, two = (derive(n) for n in KEBAB_63)
    assert one != two, kind


OTHER_UID = "9f8e7d6c-0000-4000-8000-000000000002"
RUN_DERIVED = [
    ("Job", lambda n, u: _label(jobs.job_name(n, u))),
    ("bundle ConfigMap", lambda n, u: _subdomain(jobs.bundle_config_map_name(n, u))),
    ("Review", lambda n, u: _label(rv.review_name(n, u, 3))),
    ("checkpoint ConfigMap", lambda n, u: _subdomain(rv.checkpoint_config_map_name(n, u, 3))),
    ("spend hold Review", lambda n, u: _label(hold_review_name(n, u))),
    ("effect object", lambda n, u: _subdomain(object_name(n, u, 7))),
]


@pytest.mark.parametrize(("what", "derive"), RUN_DERIVED, ids=[w for w, _ in RUN_DERIVED])
def test_a_253_character_run_name_gives_valid_distinct_derived_names(
    what: str, derive: Any
) -> None:
    """Names derived from a Run carry its uid: two Runs (never sharing a uid) stay apart
    however long the names they share."""
    name = SUBDOMAIN_253[0]
    assert derive(name, UID) != derive(name, OTHER_UID), what
    derive(SUBDOMAIN_253[1], UID)


def test_253_character_names_give_distinct_label_values() -> None:
    """Workspace (rendered owner label), Run (run label), SpendQuota: a label value."""
    one, two = (_label(label_value(n)) for n in SUBDOMAIN_253)
    assert one != two


def test_dns_label_keeps_what_fits_and_hashes_the_rest_apart() -> None:
    assert dns_label("gw-coder") == "gw-coder"
    assert dns_label("serve-x", "-0123abcd", 63) == "serve-x-0123abcd"
    # a dotted subdomain is no DNS label: made one, and never equal to its dashed twin
    assert _label(dns_label("a.b")) != dns_label("a-b") == "a-b"
    assert _label(dns_label("A_B")) != dns_label("a-b")
    long = dns_label("x" * 300, "-1")
    assert len(long) == 63 and long.endswith("-1")
    assert dns_label("x" * 300 + "a") != dns_label("x" * 300 + "b")
