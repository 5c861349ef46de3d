"""The skill library's web view in a real headless browser, against the real operator.

Debian's chromium (``/usr/bin/chromium``, installed by ``make venv``) driven by Playwright.
The operator runs as a process with ``--web-view`` on a free loopback port; the examples and
a Run execute for real; the pages must show the numbers the objects' status shows, render
user text inert, and refuse writes. Each page's screenshot is written under
``.cluster/screenshots/``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for
from tests.support.served import free_port

from .runs_support import (
    CLI,
    REPO,
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    debug,
    example,
    finished,
    get,
    run_manifest,
    sha256_hex,
    succeeded,
    wait_ready,
    wait_run,
    with_mailbox,
)

pytest.importorskip("playwright.sync_api")  # what the browser fixture (conftest) drives

SCREENSHOTS = REPO / ".cluster" / "screenshots"
XSS_SKILL = "xss-probe"
XSS_DESCRIPTION = 'Use when probing <script>window.__pwned = 1; alert("xss")</script> escaping.'
XSS_INSTRUCTIONS = (
    "# Probe\n\n<img src=x onerror=\"window.__pwned = 2; alert('img')\">\n\n"
    "[click](javascript:alert(3))\n"
)


OK_SCRIPT = "print('ok')\n"
FAIL_SCRIPT = "import sys\nprint('no')\nsys.exit(3)\n"


def _approvals() -> dict[str, Any]:
    triage = next(
        f["content"]
        for f in example("Skill", "incident-triage")["spec"]["files"]
        if f["path"] == "scripts/classify_severity.py"
    )
    allowed = [
        {
            "skill": "incident-triage",
            "path": "scripts/classify_severity.py",
            "sha256": sha256_hex(triage),
        },
        {"skill": "flaky-tool", "path": "scripts/ok.py", "sha256": sha256_hex(OK_SCRIPT)},
        {"skill": "flaky-tool", "path": "scripts/fail.py", "sha256": sha256_hex(FAIL_SCRIPT)},
    ]
    return {"security": {"skills": {"allowScriptExecution": True, "allowed": allowed}}}


@pytest.fixture(scope="module")
def web_operator(cluster: LocalCluster, crds: Any) -> Iterator[tuple[OperatorProcess, str]]:
    port = free_port()
    op = OperatorProcess(
        cluster.kubeconfig,
        {"skillLibrary": {"historyLimit": 5}, **_approvals()},
        env={
            "SWARMKIT_WEB_VIEW": f"127.0.0.1:{port}",
            "SWARMKIT_WEB_VIEW_SINGLE_USER": "1",  # the per-user view: test_webview_users.py
            "SWARMKIT_LIBRARY_FLUSH_SECONDS": "0.5",
            "SWARMKIT_METRICS_PORT": str(free_port()),
        },
    )
    op.start()
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: _up(url), 30, message=lambda: f"the web view at {url}; log:\n{op.tail()}")
    yield op, url
    op.stop()


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/skills", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


class Page:
    """One browser page that records every dialog and console error (an XSS would show)."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.dialogs: list[str] = []
        self.page.on("dialog", self._dialog)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, url: str, shot: str) -> Any:
        response = self.page.goto(url)
        assert response is not None and response.status == 200, url
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{shot}.png"), full_page=True)
        return self.page

    def close(self) -> None:
        self.page.close()


def _status(kube: Kube, ns: str, kind: str, name: str) -> dict[str, Any]:
    obj = get(kube, ns, kind, name)
    assert obj is not None
    return dict(obj.get("status") or {})


def _xss_skill() -> dict[str, Any]:
    return {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Skill",
        "metadata": {"name": XSS_SKILL},
        "spec": {
            "description": XSS_DESCRIPTION,
            "category": "capability",
            "instructions": XSS_INSTRUCTIONS,
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    }


def test_pages_show_the_objects_numbers_and_render_user_text_inert(
    kube: Kube, namespace: str, web_operator: tuple[OperatorProcess, str], browser: Any
) -> None:
    op, url = web_operator
    ns = namespace
    apply_examples(kube, ns)
    apply(kube, ns, _xss_skill())
    wait_ready(kube, ns, "Topology", "review-pipeline")
    create(kube, ns, run_manifest("review-1", input="Review PR #42."))
    run = wait_run(kube, ns, "review-1", finished, operator=op)
    assert (succeeded(run) or {}).get("status") == "True", debug(kube, ns, op)

    # Run status.skills: what the coordinator loaded and read.
    usage = {a["agent"]: a for a in run["status"]["skills"]}
    assert usage["coordinator"]["loaded"] == ["incident-triage"]
    assert usage["coordinator"]["filesRead"] == [
        {"skill": "incident-triage", "path": "reference/escalation-matrix.md"}
    ]

    # The roll-up reaches the Skill's status (batched flush, 0.5 s here).
    def rolled_up() -> dict[str, Any] | None:
        status = _status(kube, ns, "Skill", "incident-triage")
        return status if (status.get("usage") or {}).get("runsLoaded") == 1 else None

    triage = wait_for(rolled_up, 30, message=lambda: debug(kube, ns, op))
    assert triage["usage"]["runsGranted"] == 1 and triage["usage"]["loadRate"] == 1.0
    assert triage["grantedBy"] == {"count": 1, "agents": ["coordinator"]}
    summarize = _status(kube, ns, "Skill", "summarize-review")
    wait_for(
        lambda: (
            (_status(kube, ns, "Skill", "summarize-review").get("usage") or {}).get("runsGranted")
            == 1
        ),
        30,
    )
    summarize = _status(kube, ns, "Skill", "summarize-review")
    assert summarize["usage"]["loadRate"] == 0.0

    page = Page(browser)
    try:
        # Skills list: every row's numbers are the Skill objects' status numbers.
        p = page.open(f"{url}/skills", "skills")
        skills = kube.custom.list_namespaced_custom_object(
            "swarmkit.dev", "v1alpha1", ns, "skills"
        )["items"]
        assert skills
        for obj in skills:
            name, status = obj["metadata"]["name"], obj.get("status") or {}
            row = p.locator(f'tr[data-skill="{ns}/{name}"]')
            assert row.count() == 1, name
            grants = (status.get("grantedBy") or {}).get("count", 0)
            assert row.locator("td.grants").inner_text() == str(grants), name
            runs = (status.get("usage") or {}).get("runsGranted", 0)
            assert row.locator("td.runs-granted").inner_text() == str(runs), name
            rate = (status.get("usage") or {}).get("loadRate")
            want = "-" if rate is None else f"{rate * 100:.0f}%"
            assert row.locator("td.load-rate").inner_text() == want, name
        triage_row = p.locator(f'tr[data-skill="{ns}/incident-triage"]')
        assert triage_row.locator("td.load-rate").inner_text() == "100%"
        # The XSS description is shown as text, and nothing of it ran.
        xss_row = p.locator(f'tr[data-skill="{ns}/{XSS_SKILL}"]')
        assert xss_row.locator("td.description").inner_text() == XSS_DESCRIPTION
        assert p.evaluate("document.querySelectorAll('script').length") == 0
        assert p.evaluate("window.__pwned === undefined")

        # Skill detail: instructions rendered, files, scripts with sha256, history, grants.
        p = page.open(f"{url}/skills/{ns}/incident-triage", "skill")
        assert p.locator("#instructions h1").inner_text() == "Incident Triage"
        assert p.locator("#usage .load-rate").inner_text() == "100%"
        script = triage["scripts"][0]
        scripts_table = p.locator("#scripts").inner_text()
        assert script["path"] in scripts_table and script["sha256"] in scripts_table
        assert script["approved"] is True and "not approved" not in scripts_table
        assert "reference/escalation-matrix.md" in p.locator("#files").inner_text()
        history = p.locator("#history tr.current").inner_text()
        assert triage["contentHash"] in history and "coordinator" in history
        assert p.locator("#granted-by").inner_text().strip() == "coordinator"

        p = page.open(f"{url}/skills/{ns}/{XSS_SKILL}", "skill-xss")
        assert p.locator("p.description").inner_text() == XSS_DESCRIPTION
        instructions = p.locator("#instructions").inner_text()
        assert "<img src=x onerror=" in instructions  # shown as text
        assert p.locator("#instructions img").count() == 0
        assert p.locator('a[href^="javascript"]').count() == 0
        assert p.evaluate("document.querySelectorAll('script').length") == 0
        assert p.evaluate("window.__pwned === undefined")

        # Agent detail: version, granted skills resolved / missing.
        agent = _status(kube, ns, "Agent", "coordinator")
        p = page.open(f"{url}/agents/{ns}/coordinator", "agent")
        assert p.locator("#version").inner_text() == agent["version"]
        resolved = sorted(r["name"] for r in agent["resolvedSkills"])
        shown = sorted(p.locator("#granted tr.resolved td:first-child").all_inner_texts())
        assert shown == resolved

        # Runs: the list and the detail (conditions, pins, steps, skills, output).
        p = page.open(f"{url}/runs", "runs")
        assert "review-1" in p.locator("#runs").inner_text()
        p = page.open(f"{url}/runs/{ns}/review-1", "run")
        status = run["status"]
        assert p.locator("#steps").inner_text() == str(status["steps"])
        assert p.locator("#output").inner_text() == status["output"]
        loaded = p.locator("#skills-used tr.agent-usage td.loaded").all_inner_texts()
        assert "incident-triage" in loaded
        for agent_name, version in status["pinned"]["agents"].items():
            assert version in p.inner_text("main"), agent_name
        assert page.dialogs == []
    finally:
        page.close()

    # No write endpoints at all.
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        resp = httpx.request(method, f"{url}/skills/{ns}/incident-triage", timeout=5)
        assert resp.status_code == 405 and resp.headers["Allow"] == "GET, HEAD"


def test_usage_and_history_survive_restart_and_deletion(
    kube: Kube, namespace: str, web_operator: tuple[OperatorProcess, str], browser: Any
) -> None:
    op, url = web_operator
    ns = namespace
    apply_examples(kube, ns)
    wait_ready(kube, ns, "Topology", "review-pipeline")
    create(kube, ns, run_manifest("before-restart"))
    wait_run(kube, ns, "before-restart", finished, operator=op)
    wait_for(
        lambda: (
            (_status(kube, ns, "Skill", "incident-triage").get("usage") or {}).get("runsLoaded")
            == 1
        ),
        30,
        message=lambda: debug(kube, ns, op),
    )
    first_hash = _status(kube, ns, "Skill", "peer-handoff")["contentHash"]

    # A new version of a skill, then the restart: the counted Run is not counted again.
    handoff = example("Skill", "peer-handoff")
    handoff["spec"]["instructions"] += "Name the ticket.\n"
    apply(kube, ns, handoff)
    wait_for(lambda: _status(kube, ns, "Skill", "peer-handoff")["contentHash"] != first_hash, 30)
    op.stop()
    op.start()
    wait_for(lambda: _up(url), 30, message=op.tail)
    create(kube, ns, run_manifest("after-restart"))
    wait_run(kube, ns, "after-restart", finished, operator=op)
    wait_for(
        lambda: (
            (_status(kube, ns, "Skill", "incident-triage").get("usage") or {}).get("runsLoaded")
            == 2
        ),
        30,
        message=lambda: debug(kube, ns, op),
    )
    usage = _status(kube, ns, "Skill", "incident-triage")["usage"]
    assert (usage["runsGranted"], usage["runsLoaded"]) == (2, 2)

    # Deleted: the history stays, in the library ConfigMap and on the page.
    second_hash = _status(kube, ns, "Skill", "peer-handoff")["contentHash"]
    kube.custom.delete_namespaced_custom_object(
        "swarmkit.dev", "v1alpha1", ns, "skills", "peer-handoff"
    )

    def recorded_deleted() -> dict[str, Any] | None:
        cm = kube.core.read_namespaced_config_map("swarmkit-skill-library", ns)
        doc = json.loads(cm.data["library.json"])
        entry = doc["skills"].get("peer-handoff") or {}
        return entry if entry.get("deletedAt") else None

    entry = wait_for(recorded_deleted, 30, message=lambda: debug(kube, ns, op))
    assert [v["contentHash"] for v in entry["history"]] == [second_hash, first_hash]
    page = Page(browser)
    try:
        p = page.open(f"{url}/skills", "skills-deleted")
        assert "peer-handoff" in p.locator("#deleted").inner_text()
        p = page.open(f"{url}/skills/{ns}/peer-handoff", "skill-deleted")
        history = p.locator("#history").inner_text()
        assert second_hash in history and first_hash in history
        assert "coordinator" in history  # the agent pinned to each version
    finally:
        page.close()


def _metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_script_runs_reach_run_status_skill_status_metrics_and_the_page(
    kube: Kube, namespace: str, web_operator: tuple[OperatorProcess, str], browser: Any
) -> None:
    op, url = web_operator
    ns = namespace
    metrics_url = f"http://127.0.0.1:{op.extra_env['SWARMKIT_METRICS_PORT']}/metrics"
    apply_examples(kube, ns)
    tool = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Skill",
        "metadata": {"name": "flaky-tool"},
        "spec": {
            "description": "Use when a script must run.",
            "category": "capability",
            "instructions": "Run scripts/ok.py; scripts/fail.py fails.",
            "files": [
                {"path": "scripts/ok.py", "content": OK_SCRIPT},
                {"path": "scripts/fail.py", "content": FAIL_SCRIPT},
            ],
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    }
    apply(kube, ns, tool)

    def script(path: str) -> dict[str, Any]:
        args = {"skill_name": "flaky-tool", "path": path, "args": []}
        return {"toolCalls": [{"name": "run_skill_script", "arguments": args}]}

    replay = [
        {"toolCalls": [{"name": "load_skill", "arguments": {"name": "flaky-tool"}}]},
        script("scripts/ok.py"),
        script("scripts/fail.py"),
        script("scripts/ok.py"),
        {"text": "ran them"},
    ]
    apply(kube, ns, agent_with("scripter", replay, skills=["flaky-tool"]))
    wait_ready(kube, ns, "Agent", "scripter")
    before = httpx.get(metrics_url, timeout=5).text
    create(kube, ns, run_manifest("scripted", None, agent="scripter"))
    run = wait_run(kube, ns, "scripted", finished, operator=op)
    assert (succeeded(run) or {}).get("status") == "True", debug(kube, ns, op)

    [usage] = run["status"]["skills"]
    assert usage["agent"] == "scripter" and usage["loaded"] == ["flaky-tool"]
    scripts = {s["path"]: s for s in usage["scripts"]}
    assert (scripts["scripts/ok.py"]["runs"], scripts["scripts/ok.py"]["failures"]) == (2, 0)
    assert scripts["scripts/fail.py"]["failures"] == 1
    assert scripts["scripts/fail.py"]["lastExitCode"] == 3
    assert (usage["scriptRuns"], usage["scriptFailures"]) == (3, 1)

    def rolled_up() -> dict[str, Any] | None:
        status = _status(kube, ns, "Skill", "flaky-tool")
        return status if (status.get("usage") or {}).get("scriptRuns") == 3 else None

    status = wait_for(rolled_up, 30, message=lambda: debug(kube, ns, op))
    assert status["usage"]["scriptFailures"] == 1 and status["usage"]["runsLoaded"] == 1

    after = httpx.get(metrics_url, timeout=5).text
    labels = {"namespace": ns, "skill": "flaky-tool"}
    ok = _metric(after, "swarmkit_skill_script_runs_total", outcome="ok", **labels)
    failed = _metric(after, "swarmkit_skill_script_runs_total", outcome="failed", **labels)
    assert (ok, failed) == (2.0, 1.0)
    loads = _metric(after, "swarmkit_skill_loads_total", **labels)
    assert loads - _metric(before, "swarmkit_skill_loads_total", **labels) == 1.0

    page = Page(browser)
    try:
        p = page.open(f"{url}/skills/{ns}/flaky-tool", "skill-scripts")
        assert p.locator("#usage .script-runs").inner_text() == "3"
        assert p.locator("#usage .script-failures").inner_text() == "1"
        p = page.open(f"{url}/runs/{ns}/scripted", "run-scripts")
        used = p.locator("#skills-used").inner_text()
        assert "flaky-tool/scripts/ok.py: 2 runs" in used
        assert "flaky-tool/scripts/fail.py: 1 run, 1 failed (last exit 3)" in used
    finally:
        page.close()


MAILBOX_MESSAGE = '<script>window.__pwned = 4; alert("mailbox")</script> disk 91% ' + "x" * 3000


def _item_row(url: str, ns: str, item: str) -> str:
    """The item's row on the mailboxes page, as HTML ('' while it is not there)."""
    page = httpx.get(f"{url}/mailboxes/{ns}", timeout=5).text
    start = page.find(f'id="item-{item}"')
    return page[start : page.find("</tr>", start)] if start >= 0 else ""


def test_a_mailbox_item_the_operator_created_shows_on_the_mailboxes_page(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    web_operator: tuple[OperatorProcess, str],
    browser: Any,
) -> None:
    op, url = web_operator
    ns = namespace
    apply_examples(kube, ns, edit=with_mailbox)
    send = {"to": "ops", "message": MAILBOX_MESSAGE}
    replay = [{"toolCalls": [{"name": "mailbox_send", "arguments": send}]}, {"text": "posted"}]
    apply(kube, ns, agent_with("watcher", replay, tools=["mailbox_send"]))
    wait_ready(kube, ns, "Agent", "watcher")
    create(kube, ns, run_manifest("watch", None, agent="watcher"))
    run = wait_run(kube, ns, "watch", finished, operator=op)
    [effect] = run["status"]["effects"]
    assert effect["state"] == "Materialized", debug(kube, ns, op)
    item = effect["object"].split("/", 1)[1]
    # The operator's watch brings the item it created into the page's index.
    wait_for(lambda: _item_row(url, ns, item), 30, message=lambda: debug(kube, ns, op))

    page = Page(browser)
    try:
        # From the Run's effects to the item, by the link a person would click.
        p = page.open(f"{url}/runs/{ns}/watch", "run-mailbox-effect")
        p.locator(f'#effects a[href="/mailboxes/{ns}#item-{item}"]').click()
        p.wait_for_load_state()
        assert p.url == f"{url}/mailboxes/{ns}#item-{item}"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        p.screenshot(path=str(SCREENSHOTS / "mailboxes.png"), full_page=True)
        row = p.locator(f"tr#item-{item}")
        assert row.get_attribute("class") == "item unacknowledged"
        # The message as text, its first 2 KiB only, and nothing of it ran.
        assert row.locator("pre.message").text_content() == MAILBOX_MESSAGE[:2048]
        assert f"first 2048 of {len(MAILBOX_MESSAGE)} bytes" in row.inner_text()
        assert row.locator("td.sender").inner_text() == "watcher run watch"
        assert row.locator("td.ack").inner_text() == "not acknowledged"
        assert p.evaluate("document.querySelectorAll('script').length") == 0
        assert p.evaluate("window.__pwned === undefined")
        heading = p.locator(f'h3[data-mailbox="{ns}/ops"]').inner_text()
        assert "1 item, 1 not acknowledged" in heading

        # Acknowledged with the plugin: the page follows the watch.
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "NO_COLOR": "1"}
        acked = subprocess.run(
            [CLI, "ack", item, "-n", ns, "--comment", "<b>on it</b>"],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
        assert acked.returncode == 0, acked.stderr
        who = acked.stdout.strip().rsplit("acknowledged by ", 1)[1]
        wait_for(lambda: 'class="by"' in _item_row(url, ns, item), 30, message=op.tail)
        body = kube.custom.get_namespaced_custom_object(
            "swarmkit.dev", "v1alpha1", ns, "mailboxmessages", item
        )
        assert body["spec"]["acknowledgement"]["by"] == who
        when = next(
            e["time"]
            for e in body["metadata"]["managedFields"]
            if "f:acknowledgement" in ((e.get("fieldsV1") or {}).get("f:spec") or {})
        )
        p = page.open(f"{url}/mailboxes/{ns}", "mailboxes-acknowledged")
        row = p.locator(f"tr#item-{item}")
        assert row.get_attribute("class") == "item acknowledged"
        assert row.locator(".by").inner_text() == who
        assert row.locator(".at").inner_text() == f"at {when}"
        assert row.locator(".comment").inner_text() == "<b>on it</b>"
        assert row.locator("td.ack b").count() == 0
        assert (
            "1 item, 0 not acknowledged" in p.locator(f'h3[data-mailbox="{ns}/ops"]').inner_text()
        )
        # The nav reaches the page from any other.
        p = page.open(f"{url}/skills", "skills-nav")
        p.locator('header a[href="/mailboxes"]').click()
        p.wait_for_load_state()
        assert p.locator(f"tr#item-{item}").count() == 1
        assert page.dialogs == []
    finally:
        page.close()
