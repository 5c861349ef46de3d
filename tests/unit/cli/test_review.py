"""``kubectl swarmkit review``: usage errors need no cluster (the rest: integration tests)."""

from __future__ import annotations

from tests.unit.cli.support import run_cli


def test_answer_needs_text_and_decisions_need_a_name() -> None:
    no_text = run_cli("review", "answer", "ship-it-1")
    assert no_text.code == 2 and "review answer needs --text" in no_text.err
    no_name = run_cli("review", "approve")
    assert no_name.code == 2 and "review approve needs the Review's name" in no_name.err


def test_unknown_action_is_a_usage_error() -> None:
    assert run_cli("review", "maybe", "x").code == 2
