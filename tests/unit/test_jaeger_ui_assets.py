"""The dev Jaeger serves a jaeger-ui build as its UI when given one (the real v1.75.0 binary
reads ``jaeger_query``'s ``ui.assets_path``); without one it serves its placeholder page."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from swarmkit_devcluster.build import BuildError
from swarmkit_devcluster.jaeger import UI_ASSETS_ENV, Jaeger


def _page(jaeger: Jaeger, path: str) -> str:
    with urllib.request.urlopen(jaeger.query_url + path, timeout=10) as resp:
        return str(resp.read().decode())


def test_the_query_service_serves_the_given_ui_assets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(UI_ASSETS_ENV, raising=False)
    ui = tmp_path / "ui"
    ui.mkdir()
    (ui / "index.html").write_text(
        '<!doctype html><html><head><base href="/" /></head><body>our-ui-build</body></html>'
    )
    with Jaeger(ui_assets=ui) as jaeger:
        # Any UI route (the trace page included) is the build's index.html.
        assert "our-ui-build" in _page(jaeger, "/trace/0af7651916cd43dd8448eb211c80319c")
    with Jaeger() as jaeger:
        page = _page(jaeger, "/search")
        assert "our-ui-build" not in page and "not the Jaeger UI" in page


def test_a_directory_that_is_not_a_ui_build_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"has no index\.html"):
        Jaeger(ui_assets=tmp_path).start()
