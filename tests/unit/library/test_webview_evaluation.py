"""The EvalRun pages and the promotion history page of the web view, from the same indexes
as every page (the browser test is tests/integration/test_promotion_graded.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from swarmkit_operator.webview import Sources, WebView

from .fixtures import indexes, served

XSS = "<script>window.__pwned = 1</script>"


def side(outcome: str, run: str, **extra: Any) -> dict[str, Any]:
    return {"outcome": outcome, "runs": [run], "reasoning": XSS, **extra}


EVALRUN = {
    "apiVersion": "swarmkit.dev/v1alpha1",
    "kind": "EvalRun",
    "metadata": {"name": "v3", "namespace": "ns", "uid": "uid-v3", "generation": 1},
    "spec": {"evalSetRef": {"name": "cases"}, "candidate": {"agentRef": {"name": "triage"}}},
    "status": {
        "startTime": "2026-12-06T02:00:00Z",
        "verdict": "Fail",
        "verdictReason": "critical case(s) regressed: wants-refund",
        "candidate": {"target": "Agent/triage", "version": "cccc", "cases": 2, "passed": 1},
        "baseline": {"target": "Agent/triage", "version": "bbbb", "cases": 2, "passed": 2},
        "comparison": {"pairs": 2, "difference": -0.5, "regressed": 1, "fixed": 0},
        "regressed": ["wants-refund"],
        "cases": [
            {
                "name": "wants-refund",
                "grader": "contains",
                "change": "Regressed",
                "candidate": side("Failed", "v3-wants-refund-c0"),
                "baseline": side("Passed", "v2-wants-refund-c0", cached=True),
            },
            {
                "name": "says-billing",
                "grader": "contains",
                "change": "Same",
                "candidate": side("Passed", "v3-says-billing-c0"),
                "baseline": side("Passed", "v2-says-billing-c0", cached=True),
            },
        ],
        "spendReservations": ["team"],
        "conditions": [{"type": "Succeeded", "status": "True", "reason": "Evaluated"}],
    },
}
AGENT = {
    "apiVersion": "swarmkit.dev/v1alpha1",
    "kind": "Agent",
    "metadata": {"name": "triage", "namespace": "ns", "uid": "uid-a", "generation": 3},
    "spec": {"promotion": {"evalSets": [{"name": "cases"}]}},
    "status": {
        "observedGeneration": 3,
        "version": "cccc",
        "promotion": {
            "active": {"version": "bbbb", "renderedConfigMap": "a-2", "evalRuns": ["v2"]},
            "candidate": {
                "version": "cccc",
                "renderedConfigMap": "a-3",
                "verdict": "Fail",
                "regressions": ["cases/wants-refund"],
                "evalRuns": ["v3"],
            },
            "history": [
                {"version": "aaaa", "renderedConfigMap": "a-0"},
                {"version": "abab", "renderedConfigMap": "a-1", "forcedBy": "olga"},
            ],
        },
        "conditions": [
            {"type": "Promoted", "status": "False", "reason": "EvaluationFailed", "message": "x"}
        ],
    },
}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    idx = indexes()
    idx.update("evalruns", EVALRUN)
    idx.update("agents", AGENT)
    async with served(WebView(Sources(idx))) as c:
        yield c


async def test_an_evalrun_page_shows_its_cases_and_the_difference(
    client: httpx.AsyncClient,
) -> None:
    listed = (await client.get("/evalruns")).text
    assert 'href="/evalruns/ns/v3"' in listed and "Fail" in listed
    page = (await client.get("/evalruns/ns/v3")).text
    assert "critical case(s) regressed: wants-refund" in page
    assert 'id="regressed">wants-refund<' in page
    assert 'href="/runs/ns/v3-wants-refund-c0"' in page
    assert page.count("(cached)") == 2  # the baseline's results came from the cache
    assert "SpendQuota team" in page
    assert XSS not in page and "&lt;script&gt;" in page  # the grader's text is inert


async def test_an_evalrun_page_shows_each_judges_kappa() -> None:
    judged = {
        **EVALRUN,
        "metadata": {**EVALRUN["metadata"], "name": "v4", "uid": "uid-v4"},
        "status": {
            **EVALRUN["status"],
            "judges": [
                {"judge": f"Agent/{XSS}", "labels": 6, "errored": 1, "agreed": 3, "kappa": 0.0,
                 "interval": {"low": -0.31, "high": 0.31}, "minKappa": 0.6, "minLabels": 6,
                 "calibrated": False},
            ],
        },
    }  # fmt: skip
    idx = indexes()
    idx.update("evalruns", judged)
    async with served(WebView(Sources(idx))) as c:
        page = (await c.get("/evalruns/ns/v4")).text
    assert 'id="judges"' in page and "[-0.31, 0.31]" in page and "(1 errored)" in page
    assert '<td class="calibrated">no</td>' in page
    assert XSS not in page  # the judge's name is escaped like everything else


async def test_the_promotion_page_shows_active_candidate_and_history(
    client: httpx.AsyncClient,
) -> None:
    page = (await client.get("/promotion/ns/agents/triage")).text
    assert 'id="regressions">cases/wants-refund<' in page
    assert 'href="/evalruns/ns/v3"' in page and 'href="/evalruns/ns/v2"' in page
    assert "EvaluationFailed" in page
    # Newest first: the forced one, then the first.
    assert page.index("abab") < page.index("aaaa") and "olga" in page


async def test_unknown_objects_and_kinds_are_404(client: httpx.AsyncClient) -> None:
    assert (await client.get("/evalruns/ns/nope")).status_code == 404
    assert (await client.get("/promotion/ns/agents/nope")).status_code == 404
    assert (await client.get("/promotion/ns/skills/triage")).status_code == 404
