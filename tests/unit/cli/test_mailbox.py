"""``kubectl swarmkit inbox`` / ``ack``: usage errors need no cluster (the rest: integration)."""

from __future__ import annotations

import pytest

from tests.unit.cli.support import run_cli


def test_ack_needs_the_item_name() -> None:
    result = run_cli("ack")
    assert result.code == 2
    assert "the following arguments are required: name" in result.err


@pytest.mark.parametrize("command", ["inbox", "ack"])
def test_inbox_and_ack_say_how_acknowledging_works(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(command, "--help").code == 0
    assert "spec.acknowledgement" in capsys.readouterr().out
