"""What an operator start imports: libraries only some of its work needs wait for that work.

Every start (a restart too) pays its imports in CPU before the first reconcile, so a
library only the web view (Jinja2, markdown-it) or one grader (jsonschema) uses is imported
when that part starts, not with the operator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from swarmkit_operator.webview.render import markdown

DEFERRED = ("jinja2", "markdown_it", "jsonschema")


def test_an_operator_start_imports_neither_the_web_views_libraries_nor_jsonschema() -> None:
    # A fresh interpreter: this test process may have imported them for other tests.
    code = (
        "import json, sys\n"
        "import swarmkit_operator.__main__, swarmkit_operator.handlers.root\n"
        f"print(json.dumps([m for m in {DEFERRED!r} if m in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    ).stdout
    assert json.loads(out) == []


def test_the_web_view_renders_markdown_once_its_libraries_are_imported() -> None:
    # The deferral changes when they load, not what a page shows: raw HTML still escaped.
    html = str(markdown("# Title\n\n<img src=x onerror=alert(1)>"))
    assert "<h1>Title</h1>" in html
    assert "<img" not in html
    assert "markdown_it" in sys.modules
