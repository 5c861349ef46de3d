"""Command-pack argv templates under hostile inputs (issue 46 item 4).

The model fills the ``{name}`` placeholders of a Workspace command's argv. Whatever it sends,
no argv element may start with ``-`` unless the template's own text put the dash there or a
literal ``--`` element stands before it: a value is never read as an option. Hypothesis
fuzzes every command pack of ``examples/``, the templates from the issue's reports and
random templates made of literals and placeholders; the real-process tests show the two
reported injections no longer run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swarmkit_runner.commands import fill_argv
from swarmkit_runner.errors import InvalidArguments

ROOT = Path(__file__).resolve().parents[3]
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def example_templates() -> list[list[str]]:
    """argv of every command of every Workspace command pack under examples/."""
    found: list[list[str]] = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "Workspace":
                continue
            for pack in doc["spec"].get("commandPacks", []):
                found.extend(list(c["argv"]) for c in pack["commands"])
    return found


# The two reported injections, the shapes the module doc names, and a literal "--" guard.
REPORTED = [
    ["python", "{script}.py"],
    ["sort", "{name}.txt"],
    ["tool", "{a}{b}"],
    ["tool", "--out={path}", "{path}"],
    ["grep", "-e", "{pattern}", "--", "{files}"],
    ["cat", "--", "{path}.txt"],
]
TEMPLATES = example_templates() + REPORTED
NAMES = ["a", "b", "path", "pattern", "files", "script", "name"]

scalar = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["-", "--", "-o/scratch/work/x", "-cimport os", "--help", "", "-1"]),
    st.integers(min_value=-5, max_value=5),
    st.booleans(),
)
value = st.one_of(scalar, st.lists(scalar, max_size=3))
piece = st.one_of(st.sampled_from([f"{{{n}}}" for n in NAMES]), st.text("-=./xo", max_size=3))
element = st.lists(piece, min_size=1, max_size=3).map("".join)
random_template = st.lists(element, max_size=5).map(lambda rest: ["prog", *rest])


def dash_allowed(template: list[str]) -> list[tuple[bool, bool]]:
    """Per template element: (a literal "--" stands before it, its literal text starts with '-')."""
    out: list[tuple[bool, bool]] = []
    guarded = False
    for element in template:
        out.append((guarded, element.startswith("-")))
        guarded = guarded or element == "--"
    return out


def check(template: list[str], args: dict[str, Any]) -> None:
    """Either refused, or every element starting with '-' is the template's doing."""
    try:
        argv = fill_argv(template, args)
    except InvalidArguments:
        return
    # Map each output element back to its template element: a whole-element placeholder
    # with a list expands to len(list) elements.
    origin: list[int] = []
    for i, element in enumerate(template):
        whole = re.fullmatch(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", element)
        if i > 0 and whole and isinstance(args.get(whole.group(1)), list):
            origin.extend([i] * len(args[whole.group(1)]))
        else:
            origin.append(i)
    assert len(origin) == len(argv), (template, args, argv)
    allowed = dash_allowed(template)
    for text, i in zip(argv, origin, strict=True):
        guarded, literal_dash = allowed[i]
        assert "\x00" not in text
        if text.startswith("-"):
            assert guarded or literal_dash, (template, args, argv)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(template=st.sampled_from(TEMPLATES), args=st.fixed_dictionaries({n: value for n in NAMES}))
def test_known_templates_never_take_an_option_from_a_value(
    template: list[str], args: dict[str, Any]
) -> None:
    check(template, args)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(template=random_template, args=st.fixed_dictionaries({n: value for n in NAMES}))
def test_any_template_never_takes_an_option_from_a_value(
    template: list[str], args: dict[str, Any]
) -> None:
    check(template, args)


def test_examples_hold_a_command_pack() -> None:
    assert ["wc", "-l", "{path}"] in example_templates()


@pytest.mark.parametrize(
    ("template", "args", "field"),
    [
        (["python", "{script}.py"], {"script": "-cimport os;print(os.getuid())#"}, "script"),
        (["sort", "{name}.txt"], {"name": "-o/scratch/work/x"}, "name"),
        (["tool", "{a}{b}"], {"a": "", "b": "-x"}, "a"),
        (["tool", "{a}-o/x"], {"a": ""}, "a"),
        (["wc", "-l", "{path}"], {"path": ["ok", "--files0-from=x"]}, "path"),
        (["tool", "x{a}"], {"a": "nul\x00byte"}, "a"),
    ],
)
def test_a_value_that_would_be_an_option_is_refused(
    template: list[str], args: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidArguments, match=f"^InvalidArguments: {field}: "):
        fill_argv(template, args)


def test_legitimate_values_still_fill() -> None:
    assert fill_argv(["python", "{script}.py"], {"script": "build"}) == ["python", "build.py"]
    assert fill_argv(["cat", "--", "{path}.txt"], {"path": "-notes"}) == ["cat", "--", "-notes.txt"]
    assert fill_argv(["tool", "--out={path}"], {"path": "-x"}) == ["tool", "--out=-x"]
    assert fill_argv(["tool", "n{a}"], {"a": -1}) == ["tool", "n-1"]


def test_the_reported_injection_no_longer_runs(tmp_path: Path) -> None:
    """With the old fill, this argv ran the value as Python code; now there is no argv."""
    marker = tmp_path / "ran"
    script = f"-cimport pathlib;pathlib.Path({str(marker)!r}).write_text('x')#"
    with pytest.raises(InvalidArguments):
        argv = fill_argv([sys.executable, "{script}.py"], {"script": script})
        subprocess.run(argv, cwd=tmp_path, check=False, timeout=30)
    assert not marker.exists()
