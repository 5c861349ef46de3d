"""Decoding the API's JSON whatever an object holds: a value nested deeper than Python's
recursion limit (a Skill's ``outputs`` schema nested 2,000 levels, say) must not fail the
watch, the LIST or the GET that carries it, for that object or any other (issue 47 item 1).

:func:`loads` is ``json.loads``; only when that raises ``RecursionError`` is the text
decoded again with every value below :data:`MAX_DEPTH` levels replaced by a marker, and
each object carrying one gets :data:`TOO_DEEP` (the fields cut, e.g.
``spec.outputs.properties.a``): the object still flows to its index and reconcile, which
report it (``Accepted=False DepthExceeded`` naming the field) instead of the whole
resource's stream looping on one event. The operator's API layer (``k8s``) and the kubectl
plugin both decode with it (here: the one package both may import).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

#: Levels kept when a text had to be pruned (far above what any builder handles; the CRDs
#: bound depth at admission well below it).
MAX_DEPTH = 100
#: The key an object that was pruned carries (a list of the fields cut, at most a few).
TOO_DEEP = "swarmkit.io/too-deep"
#: What a pruned value is replaced by (a string no API object holds).
_CUT = "\u0000swarmkit:cut\u0000"
_CUT_JSON = json.dumps(_CUT)
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_REPORTED = 5


def loads(text: str | bytes) -> Any:
    """``json.loads``, except that a value nested too deep for it is cut (see the module)."""
    try:
        return json.loads(text)
    except RecursionError:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        value = json.loads(pruned(text, MAX_DEPTH))
    if isinstance(value, dict) and isinstance(value.get("items"), list):
        for item in value["items"]:  # a LIST: each item is its own object
            _mark(item)
    elif isinstance(value, dict) and isinstance(value.get("object"), dict):
        _mark(value["object"])  # a watch event
    else:
        _mark(value)
    return value


def too_deep(body: Any) -> list[str]:
    """The fields cut from ``body`` when it was decoded (empty: none)."""
    cut = body.get(TOO_DEEP) if isinstance(body, dict) else None
    return [str(p) for p in cut] if isinstance(cut, list) else []


def pruned(text: str, depth: int) -> str:
    """``text`` with every array or object opened below ``depth`` levels replaced by a
    marker string (strings are skipped whole: a bracket inside one is no bracket)."""
    out: list[str] = []
    level = 0
    start = 0  # where the text not yet copied begins
    cut_from = -1  # the level at which a value being cut opened (-1: not cutting)
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token[0] == '"':
            continue
        if token in "[{":
            level += 1
            if cut_from < 0 and level > depth:
                out.append(text[start : match.start()])
                cut_from = level
        else:
            if cut_from == level:
                out.append(_CUT_JSON)
                start = match.end()
                cut_from = -1
            level -= 1
    out.append(text[start:])
    return "".join(out)


def _mark(obj: Any) -> None:
    if not isinstance(obj, dict):
        return
    cut = []
    for path in _cuts(obj, ""):
        cut.append(path)
        if len(cut) >= 4 * _REPORTED:
            break
    # The user's field first: metadata.managedFields mirrors every field set, cut too.
    cut.sort(key=lambda p: p.startswith("metadata."))
    if cut:
        obj[TOO_DEEP] = cut[:_REPORTED]


def _cuts(value: Any, path: str) -> Iterator[str]:
    # Iterative: the pruned value is MAX_DEPTH levels deep, well within recursion, but a
    # stack keeps the order of the fields as they appear.
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, at = stack.pop()
        if item == _CUT:
            yield at or "."
        elif isinstance(item, dict):
            for key in reversed(list(item)):
                stack.append((item[key], f"{at}.{key}" if at else str(key)))
        elif isinstance(item, list):
            for i in reversed(range(len(item))):
                stack.append((item[i], f"{at}[{i}]"))
