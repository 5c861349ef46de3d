"""The built docs site in a real browser: follow the navigation to a reference page.

The site is built the way ``make docs`` builds it (``mkdocs build --strict``, a real
subprocess), served over HTTP by a real ``python -m http.server`` process, and opened in
Debian's chromium (installed by ``make venv``) driven by Playwright, as
``tests/integration/test_webview_browser.py`` does. From the home page the test clicks
through the left-hand navigation (Reference: Custom resources, then Topology), as a reader
would, and checks the generated field table rendered. Screenshots go to
``tmp/artifacts/docs-site/`` (ignored by git).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

playwright_api = pytest.importorskip("playwright.sync_api")

REPO = Path(__file__).resolve().parents[3]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = REPO / "tmp" / "artifacts" / "docs-site"
MKDOCS = Path(sys.executable).parent / "mkdocs"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert build.returncode == 0, build.stderr
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=out,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the docs server did not start"
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: run `make venv` (apt-get install chromium)")
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def test_navigation_leads_to_a_rendered_reference_page(site_url: str, browser: Any) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    broken: list[str] = []
    # Every request to the site itself must succeed (theme assets, search index, pages).
    page.on(
        "response",
        lambda r: (
            broken.append(f"{r.status} {r.url}")
            if r.url.startswith(site_url) and r.status >= 400
            else None
        ),
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    response = page.goto(f"{site_url}/")
    assert response is not None and response.status == 200
    assert page.locator("h1").first.inner_text().rstrip("¶") == "swarmkit-operator"
    page.screenshot(path=str(SCREENSHOTS / "home.png"))

    nav = page.get_by_role("navigation", name="Navigation")
    # Reference is a section of the left-hand navigation; its "Custom resources" entry opens
    # the kinds' index page and unfolds the kinds beneath it.
    assert nav.get_by_text("Reference", exact=True).first.is_visible()
    nav.get_by_role("link", name="Custom resources", exact=True).click()
    page.wait_for_url("**/reference/crds/")
    nav.get_by_role("link", name="Topology", exact=True).click()
    page.wait_for_url("**/reference/crds/topologies/")

    assert page.locator("h1").first.inner_text().rstrip("¶") == "Topology"
    row = page.locator("table tr", has=page.locator("code", has_text="spec.serve.drainSeconds"))
    assert row.count() == 1
    cells = [c.strip() for c in row.locator("td").all_inner_texts()]
    assert cells[1] == "integer" and cells[2] == "60", cells
    assert "≤ 3600" in cells[3], cells
    # The table is real HTML, not Markdown left as text.
    assert page.locator("table").first.locator("th").all_inner_texts()[:2] == ["Field", "Type"]
    assert "|---|" not in page.locator("article").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "reference-topology.png"), full_page=True)
    assert broken == [], broken
    page.close()
