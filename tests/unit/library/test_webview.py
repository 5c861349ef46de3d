"""The web view without a browser: pages from memory, escaping, read-only, 404s.

(The browser tests, against the real operator, are tests/integration/test_webview_browser.py.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.indexes import Indexes
from swarmkit_operator.library import SkillLibrary
from swarmkit_operator.webview import Sources, WebView
from swarmkit_operator.webview.render import markdown

from .fixtures import agent, indexes, run, served, skill, usage

XSS = '<script>alert("pwned")</script>'


def populated() -> tuple[Indexes, SkillLibrary]:
    idx = indexes()
    idx.update(
        "skills",
        skill(
            "incident-triage",
            description=f"Triage incidents {XSS}",
            instructions=(
                "# Triage\n\n1. Ask.\n\n<img src=x onerror=alert(1)>\n\n[x](javascript:alert(1))"
            ),
            files=[{"path": "scripts/c.py", "content": "print(1)\n"}],
            scripts=[
                {"path": "scripts/c.py", "sha256": "f" * 64, "approved": True, "reason": "Approved"}
            ],
            status={
                "grantedBy": {"count": 1, "agents": ["lead"]},
                "usage": {"runsGranted": 4, "runsLoaded": 3, "loadRate": 0.75},
            },
        ),
    )
    idx.update(
        "agents",
        agent(
            "lead",
            ["incident-triage", "gone"],
            resolved={"incident-triage": "a" * 64},
            missing=["gone"],
        ),
    )
    idx.update(
        "runs",
        run(
            "r1",
            granted=["incident-triage"],
            usage=[usage("lead", ["incident-triage"])],
            output=XSS,
        ),
    )
    planner = run("plan", output="planned")
    planner["status"]["effects"] = [
        {"seq": 0, "kind": "schedule", "agent": "lead", "to": "wakeup",
         "startAfter": "2026-12-05T09:00:00Z", "state": "Materialized",
         "object": "Run/plan-1a2b3c4d-fx0"},
        {"seq": 1, "kind": "mailbox_send", "agent": "lead", "to": "ops",
         "state": "Failed", "message": f"cannot create {XSS}"},
    ]  # fmt: skip
    idx.update("runs", planner)
    lib = SkillLibrary(OperatorConfig(), idx)
    lib.skill_seen("ns", "incident-triage", "a" * 64)
    return idx, lib


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    idx, lib = populated()
    async with served(WebView(Sources(idx, lib))) as c:
        yield c


async def test_skills_list_shows_numbers_and_escapes_descriptions(
    client: httpx.AsyncClient,
) -> None:
    resp = await client.get("/skills")
    assert resp.status_code == 200
    assert "script-src" not in resp.headers["Content-Security-Policy"]  # default-src 'none'
    assert "<script>" not in resp.text
    assert "Triage incidents &lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in resp.text
    assert '<td class="num load-rate">75%</td>' in resp.text
    assert '<td class="num runs-granted">4</td>' in resp.text


async def test_skill_detail_renders_markdown_without_raw_html(client: httpx.AsyncClient) -> None:
    text = (await client.get("/skills/ns/incident-triage")).text
    assert "<h1>Triage</h1>" in text and "<li>Ask.</li>" in text
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert 'href="javascript' not in text
    assert "f" * 64 in text and "approved" in text  # the script's pin
    assert "/agents/ns/lead" in text


async def test_agent_run_and_missing_pages(client: httpx.AsyncClient) -> None:
    agent_page = (await client.get("/agents/ns/lead")).text
    assert 'class="missing"' in agent_page and ">gone<" in agent_page
    assert "resolved" in agent_page and "aaaaaaaaaaaa" in agent_page
    run_page = (await client.get("/runs/ns/r1")).text
    assert "&lt;script&gt;" in run_page and "<script>" not in run_page
    assert '<td class="loaded">incident-triage</td>' in run_page
    assert (await client.get("/runs/ns/nope")).status_code == 404
    assert (await client.get("/skills/ns/nope")).status_code == 404
    runs = (await client.get("/runs")).text
    assert "/runs/ns/r1" in runs


async def test_a_run_page_lists_its_effects(client: httpx.AsyncClient) -> None:
    page = (await client.get("/runs/ns/plan")).text
    assert page.count('<tr class="effect">') == 2
    assert '<a href="/runs/ns/plan-1a2b3c4d-fx0">Run/plan-1a2b3c4d-fx0</a>' in page
    assert "after 2026-12-05T09:00:00Z" in page
    assert "Failed" in page and "<script>" not in page
    quiet = (await client.get("/runs/ns/r1")).text
    assert "no schedule, agent_message or mailbox_send" in quiet


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
async def test_every_write_method_is_refused(client: httpx.AsyncClient, method: str) -> None:
    for path in ("/skills", "/skills/ns/incident-triage", "/anything"):
        resp = await client.request(method, path)
        assert resp.status_code == 405, (method, path)
        assert resp.headers["Allow"] == "GET, HEAD"


async def test_head_and_redirect(client: httpx.AsyncClient) -> None:
    assert (await client.head("/skills")).status_code == 200
    resp = await client.get("/")
    assert resp.status_code == 302 and resp.headers["Location"] == "/skills"


def test_markdown_escapes_html_and_drops_script_links() -> None:
    html = markdown('hi <b onclick="x()">b</b>\n\n[go](javascript:alert(1))')
    assert "<b" not in html and "&lt;b onclick" in html
    assert 'href="javascript' not in html and "[go](javascript:alert(1))" in html
