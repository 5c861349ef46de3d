"""hack/lint/function_length.py: the 80-line rule for product functions and its allow-list."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "lint" / "function_length.py"

spec = importlib.util.spec_from_file_location("function_length", SCRIPT)
assert spec is not None and spec.loader is not None
fl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fl)


def test_a_new_long_function_is_refused_and_a_listed_one_may_not_grow() -> None:
    found = {"a.py::new": 81, "a.py::old": 120, "a.py::short": 10}
    bad = fl.problems(found, {"a.py::old": 119})
    assert bad == [
        "a.py::new: 81 lines, over 80; split it by meaning",
        "a.py::old: 120 lines, grew past the 119 it had; split it by meaning",
    ]


def test_the_list_stays_exact_when_a_function_shrinks_or_goes() -> None:
    bad = fl.problems({"a.py::f": 90, "a.py::g": 60}, {"a.py::f": 95, "a.py::g": 85, "b::h": 99})
    assert "function-length-allowlist.txt: a.py::f shrank to 90; lower its line to 90" in bad
    assert "function-length-allowlist.txt: a.py::g is gone or fits now; remove its line" in bad
    assert "function-length-allowlist.txt: b::h is gone or fits now; remove its line" in bad


def test_nested_and_method_names_are_qualified(tmp_path: Path) -> None:
    pkg = tmp_path / "operator" / "swarmkit_api"
    pkg.mkdir(parents=True)
    body = "\n".join(f"        x{i} = {i}" for i in range(85))
    (pkg / "m.py").write_text(f"class C:\n    def long(self):\n{body}\n")
    assert dict(fl.spans(tmp_path)) == {"operator/swarmkit_api/m.py::C.long": 86}


def test_the_repository_passes() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
