"""``kubectl swarmkit status`` with an object no Python decoder can read in the namespace
(issue 47 item 1): it lists, summarizes and prints, never a traceback. The apiserver's
answer is the recorded text of such a LIST."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from swarmkit_cli import kube as cli_kube
from swarmkit_cli.commands.status import summarize


def skill_text(name: str, levels: int) -> str:
    nested = '{"a": ' * levels + "1" + "}" * levels
    return (
        '{"apiVersion": "swarmkit.dev/v1alpha1", "kind": "Skill", "metadata": '
        f'{{"name": "{name}", "namespace": "ns"}}, "spec": {{"outputs": {nested}}}, '
        '"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Rendered"}]}}'
    )


class Answer:
    def __init__(self, text: str) -> None:
        self.data = text.encode()


class Custom:
    def list_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> Answer:
        assert kwargs.get("_preload_content") is False
        items = ", ".join([skill_text("poison", 3000), skill_text("fine", 2)])
        return Answer(f'{{"metadata": {{}}, "items": [{items}]}}')


def test_status_lists_and_summarizes_past_a_poison_object(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = cli_kube.Kube(api_client=None, namespace="ns")
    monkeypatch.setattr(cli_kube.Kube, "custom", property(lambda self: Custom()))
    items = kube.list("Skill")
    assert [o["metadata"]["name"] for o in items] == ["poison", "fine"]
    summary = summarize("ns", {"Skill": items}, datetime.now(UTC))
    assert not summary.failing
