"""The quota refresh is a shared pass: one quota that fails there is that quota's problem
(issue 47 item 3). The apiserver is replaced by recorded answers: what is tested is what
the pass does with a refusal, not the refusal itself."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from swarmkit_api.conditions import REASON_INVALID, REASON_MATCHED, SELECTOR_UNMATCHED
from swarmkit_operator import k8s
from swarmkit_operator.conditions import get_condition
from swarmkit_operator.runs import spend


def quota(namespace: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": namespace,
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "generation": 1,
        },
        "spec": {
            "cost": "1",
            "currency": "USD",
            "window": "daily",
            "selector": {"matchLabels": labels},
        },
    }


def test_a_bad_selector_gets_a_condition_and_every_other_quota_is_refreshed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = [quota("team-a", "bad", {"bad key!": "x"}), quota("team-b", "good", {"team": "b"})]
    written: dict[str, dict[str, Any]] = {}

    async def listed(_namespace: str | None) -> list[dict[str, Any]]:
        return docs

    async def list_objects(path: str, selector: str) -> list[dict[str, Any]]:
        if "bad key!" in selector:
            raise k8s.ApiError("GET", path, 400, "unable to parse requirement: invalid label key")
        return [{"metadata": {"name": "t"}}]

    async def write(doc: dict[str, Any], status: dict[str, Any]) -> bool:
        written[doc["metadata"]["name"]] = status
        return True

    monkeypatch.setattr(spend, "_list", listed)
    monkeypatch.setattr(k8s, "list_objects", list_objects)
    monkeypatch.setattr(spend, "_write", write)
    asyncio.run(spend.refresh([], lambda _uid: True))

    bad = get_condition(written["bad"]["conditions"], SELECTOR_UNMATCHED)
    assert bad is not None and bad["status"] == "True" and bad["reason"] == REASON_INVALID
    assert "spec.selector.matchLabels" in bad["message"]
    good = get_condition(written["good"]["conditions"], SELECTOR_UNMATCHED)
    assert good is not None and good["reason"] == REASON_MATCHED


def test_a_quota_failing_for_any_other_reason_does_not_stop_the_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = [quota("team-a", "broken", {"team": "a"}), quota("team-b", "good", {"team": "b"})]
    written: list[str] = []

    async def listed(_namespace: str | None) -> list[dict[str, Any]]:
        return docs

    async def list_objects(path: str, selector: str) -> list[dict[str, Any]]:
        if "team=a" in selector:
            raise k8s.ApiError("GET", path, 500, "etcd timeout")
        return []

    async def write(doc: dict[str, Any], _status: dict[str, Any]) -> bool:
        written.append(doc["metadata"]["name"])
        return True

    monkeypatch.setattr(spend, "_list", listed)
    monkeypatch.setattr(k8s, "list_objects", list_objects)
    monkeypatch.setattr(spend, "_write", write)
    asyncio.run(spend.refresh([], lambda _uid: True))
    assert written == ["good"]


def test_a_case_run_starts_under_its_evalruns_reservation_only_while_it_is_live(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Run labelled as an EvalRun's may skip its own reservation only when every covering
    quota holds that EvalRun's live (reserved, not yet settled) entry, whose uid names the
    EvalRun that must prove it created the Run (test_eval_trust.py)."""
    docs = {
        "a": {"status": {"entries": [{"run": "EvalRun/ev", "uid": "u", "state": "reserved"}]}},
        "b": {"status": {"entries": [{"run": "EvalRun/ev", "uid": "u", "state": "spent"}]}},
        "c": {"status": {"entries": [{"run": "other", "uid": "v", "state": "reserved"}]}},
    }

    async def get_custom(_plural: str, _namespace: str, name: str) -> dict[str, Any]:
        return docs[name]

    monkeypatch.setattr(k8s, "get_custom", get_custom)
    spend._listed.clear()

    def covered(names: list[str], who: str = "EvalRun/ev") -> bool:
        return asyncio.run(spend.reservation_of("ns", names, who)) is not None

    assert asyncio.run(spend.reservation_of("ns", ["a"], "EvalRun/ev")) == "u"  # its uid
    assert covered(["a"])
    assert not covered(["a"], "EvalRun/forged")
    assert not covered(["b"])  # settled: a late Run reserves its own cap
    assert not covered(["a", "c"])  # one quota without it: the Run reserves on all
