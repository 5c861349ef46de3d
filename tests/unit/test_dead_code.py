"""hack/lint/dead_code.py: dead code is reported, a reflection call is whitelisted with its
reason, and the whitelist stays exact."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "lint" / "dead_code.py"

spec = importlib.util.spec_from_file_location("dead_code", SCRIPT)
assert spec is not None and spec.loader is not None
dc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dc)


def test_an_unused_function_is_reported_unless_whitelisted_and_a_stale_entry_is_too() -> None:
    found = [("a.py::dead", "function", 3), ("a.py::collect", "method", 9)]
    bad = dc.problems(found, {"a.py::collect": "prometheus calls it", "b.py::gone": "x"})
    assert bad == [
        "a.py:3: unused function 'dead'",
        "dead-code-whitelist.txt: b.py::gone is used now (or gone): drop it",
    ]


def test_every_whitelist_entry_says_why(tmp_path: Path) -> None:
    listed = tmp_path / "list.txt"
    listed.write_text("# header\na.py::f  # a library calls it\nb.py::g\n")
    with pytest.raises(SystemExit, match=r"b\.py::g says no why"):
        dc.read_whitelist(listed)
    assert all(dc.read_whitelist(dc.WHITELIST).values())


def test_a_planted_dead_function_is_found_and_a_marked_reconciler_is_not(tmp_path: Path) -> None:
    module = tmp_path / "planted.py"
    module.write_text(
        "from swarmkit_operator.reconcile.controller import reconciler\n\n"
        "def dead() -> None: ...\n\n"
        "@reconciler('X')\nasync def collected(ctl, ns, name, force): ...\n"
    )
    finder = dc.vulture.Vulture(ignore_decorators=list(dc.COLLECTED))
    finder.scavenge([str(module)])
    names = {i.name for i in finder.get_unused_code(min_confidence=60) if i.typ == "function"}
    assert names == {"dead"}
