"""A server-side apply body is read by the apiserver as YAML: text outside the BMP (an
emoji) must travel as UTF-8, not as the UTF-16 surrogate escapes the client's encoder
writes, which the apiserver refuses (found by the fuzz suite: an Agent's gateway status
write failed with HTTP 400 and was retried for as long as the text stayed)."""

from __future__ import annotations

import json

import pytest
import yaml

from swarmkit_operator.k8s.objects import apply_body

TEXTS = [
    "plain",
    "é" * 3,
    "ship it \U0001f680",
    "nul \x00 del \x7f nel \x85 c1 \x9f",
    "\u2028\ufeff",
]


@pytest.mark.parametrize("text", TEXTS)
def test_an_apply_body_round_trips_as_json_and_as_yaml(text: str) -> None:
    body = {"status": {"conditions": [{"message": text}]}}
    wire = apply_body(body)
    assert "\\ud83d" not in wire.lower()
    assert json.loads(wire) == body
    assert yaml.safe_load(wire) == body
