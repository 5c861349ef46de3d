"""Condition types and reasons come from ``swarmkit_api.conditions``, never from literals.

The constants are checked for shape (unique CamelCase words, names that spell their
values), and the operator's source is scanned with ``ast`` for a string literal where a
condition's type or reason is written (``Verdict(...)``, ``set_condition(...)``,
``reason=...``, ``reason = "..."``) or where one of ours is read by name
(``get_condition(conds, "Ready")``, ``cond.get("type") == "Ready"``), so a new literal
cannot creep back in.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from swarmkit_api import conditions

OPERATOR = Path(conditions.__file__).resolve().parents[1] / "swarmkit_operator"
CAMEL = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)*\Z")
STATUSES = {"True", "False", "Unknown"}
REASON_PREFIX = "REASON_"

# Where a condition is *written*: any CamelCase literal there is a finding.
# callee name -> ({positional index: "type" | "reason"}, {keyword: "type" | "reason"}).
Spec = tuple[dict[int, str], dict[str, str]]
T, R = "type", "reason"
WRITERS: dict[str, Spec] = {
    # builders.Verdict(type, status, reason, message)
    "Verdict": ({0: T, 2: R}, {"type": T, "reason": R}),
    # builders.skill.ScriptVerdict(path, sha256, approved, reason, message)
    "ScriptVerdict": ({3: R}, {"reason": R}),
    # builders.topology.GraphProblem(reason, path)
    "GraphProblem": ({0: R}, {"reason": R}),
    # builders.gateway.Serving(status, reason, message)
    "Serving": ({1: R}, {"reason": R}),
    # conditions.set_condition(conditions, type_, status, reason, message)
    "set_condition": ({1: T, 3: R}, {"type_": T, "reason": R}),
    # builders.run_status.final(reason, message)
    "final": ({0: R}, {"reason": R}),
    # dataclasses.replace(verdict, reason=...)
    "replace": ({}, {"reason": R}),
    # GatewayController._write(agent, status, state, reason, message, fields)
    "_write": ({3: R}, {"reason": R}),
    # resolve_topology's rejected(reason, message)
    "rejected": ({0: R}, {"reason": R}),
}
# builders.run_status.Verdict(phase, status, reason, ...): its first field is a phase.
RUN_VERDICT: Spec = ({2: R}, {"reason": R})
# Where a condition is *read* by type: a literal spelling one of ours is a finding (the
# same helpers read Kubernetes' own conditions of Pods and Jobs, e.g. "PodScheduled").
READERS: dict[str, Spec] = {
    "get_condition": ({1: T}, {"type_": T}),
    "condition_status": ({1: T}, {"type_": T}),
    "condition": ({1: T}, {"type_": T}),
}
FIELDS = {"type", "reason"}
# (file relative to swarmkit_operator, literal): literals that look like a reason but are not
# one the operator writes.
ALLOWED = {
    # A display fallback for another object's Ready condition without a reason, only ever
    # part of a Run's waiting message.
    ("workload/resolve.py", "NotReady"),
}


def _constants() -> dict[str, str]:
    return {name: getattr(conditions, name) for name in conditions.__all__}


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).upper()


def test_every_constant_is_exported_typed_and_a_camel_case_word() -> None:
    public = {n for n in vars(conditions) if n.isupper() and not n.startswith("_")}
    assert public == set(conditions.__all__)
    assert len(conditions.__all__) == len(set(conditions.__all__))
    annotations = conditions.__annotations__
    for name, value in _constants().items():
        assert annotations[name] == "Final[str]", name
        assert isinstance(value, str) and CAMEL.match(value), (name, value)
        # The name spells the value, so a typo in either shows.
        bare = name.removeprefix(REASON_PREFIX)
        assert _snake(value) == bare, (name, value)


def test_types_and_reasons_are_each_defined_once() -> None:
    types = {n: v for n, v in _constants().items() if not n.startswith(REASON_PREFIX)}
    reasons = {n: v for n, v in _constants().items() if n.startswith(REASON_PREFIX)}
    assert len(set(types.values())) == len(types)
    assert len(set(reasons.values())) == len(reasons)
    assert set(types.values()) == {
        "Ready",
        "Accepted",
        "ScriptsApproved",
        "SkillsResolved",
        "Serving",
        "Succeeded",
        "BudgetWarning",
        "SelectorUnmatched",
        "Promoted",
    }
    assert {"Valid", "TooLarge", "Cycle", "PinMismatch", "Pending", "JobLost"} <= set(
        reasons.values()
    )


@dataclass(frozen=True)
class Finding:
    path: str
    node: ast.Constant
    kind: str  # "type" | "reason"
    where: str

    @property
    def literal(self) -> str:
        return str(self.node.value)

    @property
    def constant(self) -> str:
        """The name to use instead (a new reason needs a constant first)."""
        names = {v: n for n, v in _constants().items() if n.startswith(REASON_PREFIX)}
        if self.kind == T:
            names = {v: n for n, v in _constants().items() if not n.startswith(REASON_PREFIX)}
        return names.get(self.literal, f"a new constant for {self.literal!r}")

    def __str__(self) -> str:
        return f"{self.path}:{self.node.lineno}: {self.literal!r} as {self.where}: {self.constant}"


def _callee(func: ast.expr) -> tuple[str, str | None]:
    """(called name, the name it is an attribute of) for ``f(...)`` / ``x.f(...)``."""
    if isinstance(func, ast.Name):
        return func.id, None
    if isinstance(func, ast.Attribute):
        owner = func.value
        return func.attr, owner.id if isinstance(owner, ast.Name) else None
    return "", None


def _literals(node: ast.expr) -> Iterator[ast.Constant]:
    """String literals a value can evaluate to (through ``a if c else b``, ``a or b``,
    tuples), not those inside calls or subscripts (dict keys like ``get("reason")``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node
    elif isinstance(node, ast.IfExp):
        yield from _literals(node.body)
        yield from _literals(node.orelse)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            yield from _literals(value)
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for elt in node.elts:
            yield from _literals(elt)


def _is_reason_name(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and (node.id == "reason" or node.id.endswith("_reason"))


def _field_read(node: ast.expr) -> str | None:
    """``x.get("type")``, ``x["reason"]``, ``x.reason``, ``reason``: which field it reads."""
    key: ast.expr | None = None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "get" and node.args:
            key = node.args[0]
    elif isinstance(node, ast.Subscript):
        key = node.slice
    elif isinstance(node, ast.Attribute):
        return node.attr if node.attr in FIELDS else None
    elif _is_reason_name(node):
        return R
    if isinstance(key, ast.Constant) and key.value in FIELDS:
        return str(key.value)
    return None


def scan(source: str, path: str, run_status_module: bool = False) -> list[Finding]:
    """Every literal type or reason in ``source``."""
    tree = ast.parse(source)
    ours = set(_constants().values())
    # Names bound to builders.run_status (``from ..builders import run_status as rs``).
    run_status_names = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name == "run_status"
    }
    findings: list[Finding] = []

    def written(node: ast.expr, kind: str, where: str) -> None:
        for lit in _literals(node):
            word = CAMEL.match(lit.value) and lit.value not in STATUSES
            if word and (path, lit.value) not in ALLOWED:
                findings.append(Finding(path, lit, kind, where))

    def read(node: ast.expr, kind: str, where: str) -> None:
        for lit in _literals(node):
            if lit.value in ours:
                findings.append(Finding(path, lit, kind, where))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name, owner = _callee(node.func)
            writer = WRITERS.get(name)
            if name == "Verdict" and (run_status_module or owner in run_status_names):
                writer = RUN_VERDICT
            for spec, check in ((writer, written), (READERS.get(name), read)):
                if spec is None:
                    continue
                positions, keywords = spec
                for i, arg in enumerate(node.args):
                    if i in positions:
                        check(arg, positions[i], f"argument {i} of {name}()")
                for kw in node.keywords:
                    if kw.arg is not None and kw.arg in keywords:
                        check(kw.value, keywords[kw.arg], f"{kw.arg}= of {name}()")
            # problems.append(("UnknownTool", message)): (reason, message) pairs.
            target = node.func.value if isinstance(node.func, ast.Attribute) else None
            if name == "append" and target is not None and _callee(target)[0] == "problems":
                for arg in node.args:
                    if isinstance(arg, ast.Tuple) and arg.elts:
                        written(arg.elts[0], R, "the reason of a problem")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                pairs = [(target, node.value)]
                # approved, reason = True, "Approved"
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts, strict=False))
                for name_node, value in pairs:
                    if value is not None and _is_reason_name(name_node):
                        written(value, R, "a value of a reason variable")
        elif isinstance(node, ast.For) and _is_reason_name(node.target):
            written(node.iter, R, "a value of a reason variable")
        elif isinstance(node, ast.Compare):
            for left, right in itertools.pairwise([node.left, *node.comparators]):
                if field := _field_read(left):
                    read(right, field, f"a compared condition {field}")
                elif field := _field_read(right):
                    read(left, field, f"a compared condition {field}")
    return findings


#: The modules that define and build a Run's Verdict (their own ``Verdict(...)`` calls).
VERDICT_MODULES = {"builders/run_status.py", "builders/run_verdict.py", "builders/run_pod.py"}


def test_the_operator_names_condition_types_and_reasons_by_constant() -> None:
    findings: list[Finding] = []
    files = sorted(OPERATOR.rglob("*.py"))
    assert len(files) > 50  # the tree is really there
    for file in files:
        rel = file.relative_to(OPERATOR).as_posix()
        findings += scan(file.read_text(), rel, run_status_module=rel in VERDICT_MODULES)
    assert not findings, "use swarmkit_api.conditions:\n" + "\n".join(map(str, findings))


SAMPLE = """
from ..builders import run_status as rs
from dataclasses import replace

def f(cond, v, problems, conds):
    a = Verdict("Ready", "False", "TooLarge", "m")
    b = Verdict(type="Accepted", status="True", reason="Valid")
    c = rs.Verdict(phase="Pending", status="Unknown", reason="Pending")
    d = rs.Verdict("Finished", "False", "Failed")
    e = set_condition(conds, "Serving", "True", "RollingOut")
    replace(v, status="False", reason="TimedOut")
    reason = "SkillNotFound" if cond else "SkillNotReady"
    status_reason = ("True", "Succeeded")
    for reason in ("PinMismatch", "ExecutionDisabled"):
        pass
    problems.append(("UnknownTool", "no such tool"))
    get_condition(conds, "Succeeded")
    get_condition(conds, "PodScheduled")
    if cond.get("type") == "Ready" or cond["reason"] in ("Cancelled", "Other"):
        pass
    if v.reason != "JobLost" and cond.get("type") == "composed":
        pass
    approved, reason = True, "Approved"
    return ScriptVerdict("p", "s", False, "NotAllowListed"), GraphProblem("Cycle", ())
"""


def test_the_scan_finds_each_kind_of_literal() -> None:
    """The scan itself: every way a literal can stand for a type or reason is found, and
    Kubernetes' own names (``PodScheduled``), phases and statuses are not."""
    found = sorted((f.node.lineno, f.literal) for f in scan(SAMPLE, "sample.py"))
    assert found == [
        (6, "Ready"),
        (6, "TooLarge"),
        (7, "Accepted"),
        (7, "Valid"),
        (8, "Pending"),
        (9, "Failed"),
        (10, "RollingOut"),
        (10, "Serving"),
        (11, "TimedOut"),
        (12, "SkillNotFound"),
        (12, "SkillNotReady"),
        (13, "Succeeded"),
        (14, "ExecutionDisabled"),
        (14, "PinMismatch"),
        (16, "UnknownTool"),
        (17, "Succeeded"),
        (19, "Cancelled"),
        (19, "Ready"),
        (21, "JobLost"),
        (23, "Approved"),
        (24, "Cycle"),
        (24, "NotAllowListed"),
    ]


@pytest.mark.parametrize(
    ("constant", "literal", "word"),
    [
        ("Verdict(READY,", 'Verdict("Ready",', "Ready"),
        (", REASON_VALID,", ', "Valid",', "Valid"),
    ],
)
def test_a_literal_reintroduced_in_a_real_builder_is_caught(
    constant: str, literal: str, word: str
) -> None:
    """The scan of a real module fails once a constant is swapped back for its literal."""
    source = (OPERATOR / "builders" / "workspace.py").read_text()
    assert not scan(source, "builders/workspace.py")
    assert constant in source
    broken = source.replace(constant, literal, 1)
    assert [f.literal for f in scan(broken, "builders/workspace.py")] == [word]
