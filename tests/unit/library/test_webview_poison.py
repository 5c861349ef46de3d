"""One poison object in a namespace does not break the web view for anyone else (issue 47
item 1): a Skill too deep for Python's JSON decoder (decoded the way the operator decodes it,
cut and marked) and a Run whose status has a shape the page does not expect sit in namespace
``bad``; every page for namespace ``ok`` still renders, the list pages show everyone else
and name what they could not show."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from swarmkit_api.decoding import loads, too_deep
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.library import SkillLibrary
from swarmkit_operator.webview import Sources, WebView

from .fixtures import indexes, run, served, skill


def _deep_skill(levels: int) -> dict[str, object]:
    text = json.dumps(skill("poison", "bad"))
    nested = '{"type":"object","properties":{"a":' * levels + '{"type":"string"}' + "}}" * levels
    text = text.replace('"files": []', f'"files": [], "outputs": {nested}', 1)
    decoded = loads(text)
    assert too_deep(decoded), "the poison must be one Python's decoder refuses"
    return dict(decoded)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    idx = indexes()
    idx.update("skills", skill("good", "ok"))
    idx.update("skills", _deep_skill(2000))
    idx.update("runs", run("fine", "ok"))
    broken = run("broken", "bad")
    broken["status"]["skills"] = [{"agent": "lead", "loaded": 3}]  # not a list of names
    idx.update("runs", broken)
    async with served(WebView(Sources(idx, SkillLibrary(OperatorConfig(), idx)))) as c:
        yield c


async def test_pages_for_other_namespaces_render_beside_a_poison_object(
    client: httpx.AsyncClient,
) -> None:
    for path in ("/skills/ok/good", "/runs/ok/fine", "/mailboxes", "/mailboxes/ok"):
        assert (await client.get(path)).status_code == 200, path
    skills = await client.get("/skills")
    assert skills.status_code == 200
    assert 'data-skill="ok/good"' in skills.text
    runs = await client.get("/runs")
    assert runs.status_code == 200
    assert "/runs/ok/fine" in runs.text
    assert "1 object(s) could not be shown" in runs.text and "bad/broken" in runs.text
