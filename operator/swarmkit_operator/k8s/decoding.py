"""Decoding the API server's JSON so that one object can never stop a LIST or a watch.

The API server admits JSON nested up to 10,000 levels inside fields it cannot check (a
Skill's ``outputs`` schema, an Agent's replayed tool arguments, ...); Python's decoder
gives up near 1,000 with ``RecursionError``. Raised while a watch line or a LIST page is
decoded, that error would fail the whole stream (every object of the kind, in every
namespace) and, re-listed, fail it again: one poison object stalls everyone.

:func:`loads` decodes as usual; only when the fast decoder refuses does it decode again
with an explicit stack (no recursion), keeping every container down to :data:`CUT_DEPTH`
levels and replacing what lies deeper with :data:`CUT_VALUE`. The Kubernetes object that
held the cut value is marked: its ``metadata.annotations`` get :data:`UNDECODABLE` naming
the field (in memory only; the operator never writes metadata back), and its controller
refuses it with a condition (``Accepted=False``, reason ``Unprocessable``) instead of
reconciling a truncated spec. Everything else in the same answer decodes in full.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Containers deeper than this are cut by the fallback decoder (the fast one took them up to
#: its recursion limit; the API's own bound on free JSON values is far below, see
#: ``swarmkit_api.base.MAX_JSON_DEPTH``).
CUT_DEPTH = 200
CUT_VALUE = "<cut: nested too deep to decode>"
#: The in-memory annotation that marks an object whose content had to be cut.
UNDECODABLE = "swarmkit.dev/undecodable"

_SCALAR = re.compile(
    r'\s*(?:"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)', re.S
)
_SPACE = re.compile(r"\s*")
_DECODER = json.JSONDecoder()


def loads(text: str | bytes) -> Any:
    """``json.loads``, falling back to :func:`loads_bounded` on ``RecursionError``."""
    try:
        return json.loads(text)
    except RecursionError:
        return loads_bounded(text.decode() if isinstance(text, bytes) else text)


class _Frame:
    """One open container: its value, the key being filled (objects), its path."""

    __slots__ = ("key", "path", "value")

    def __init__(self, value: dict[str, Any] | list[Any], path: str) -> None:
        self.value = value
        self.key: str | None = None
        self.path = path

    def add(self, item: Any) -> None:
        if isinstance(self.value, list):
            self.value.append(item)
        else:
            assert self.key is not None
            self.value[self.key] = item
            self.key = None

    def child_path(self) -> str:
        if isinstance(self.value, list):
            return f"{self.path}[{len(self.value)}]"
        return f"{self.path}.{self.key}" if self.path else str(self.key)


def loads_bounded(text: str, cut_depth: int = CUT_DEPTH) -> Any:
    """Decode ``text`` without recursion; containers deeper than ``cut_depth`` become
    :data:`CUT_VALUE` and the enclosing Kubernetes object is marked (module docstring)."""
    stack: list[_Frame] = []
    root: list[Any] = []
    pos = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    while True:
        top = stack[-1] if stack else None
        if top is not None and isinstance(top.value, dict) and top.key is None:
            pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
            if text[pos] == "}":
                pos = _close(stack, root, text, pos)
                if not stack:
                    break
                continue
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
            if text[pos] != ":":
                raise json.JSONDecodeError("expected ':'", text, pos)
            top.key = str(key)
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        char = text[pos]
        if top is not None and isinstance(top.value, list) and char == "]":
            pos = _close(stack, root, text, pos)
            if not stack:
                break
            continue
        path = top.child_path() if top is not None else ""
        if char in "{[":
            if len(stack) >= cut_depth:
                pos = _skip_container(text, pos)
                _mark(stack, path)
                (top.add if top is not None else root.append)(CUT_VALUE)
            else:
                stack.append(_Frame({} if char == "{" else [], path))
                pos += 1
                continue
        else:
            found = _SCALAR.match(text, pos)
            if found is None:
                raise json.JSONDecodeError("expected a value", text, pos)
            value = json.loads(found.group(0))
            pos = found.end()
            if top is None:
                return value
            top.add(value)
        pos = _after_value(text, pos, stack)
        if not stack:
            break
    return root[0]


def _close(stack: list[_Frame], root: list[Any], text: str, pos: int) -> int:
    """Close the innermost container (its bracket at ``pos``); the position after it."""
    done = stack.pop()
    if not stack:
        root.append(done.value)
        return pos + 1
    stack[-1].add(done.value)
    return _after_value(text, pos + 1, stack)


def _after_value(text: str, pos: int, stack: list[_Frame]) -> int:
    """Past the ``,`` that may follow a value (a closing bracket is left for the loop)."""
    if not stack:
        return pos
    pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
    return pos + 1 if text[pos] == "," else pos


def _skip_container(text: str, pos: int) -> int:
    """The position after the container that starts at ``pos`` (strings respected)."""
    depth = 0
    strings = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
    while True:
        char = text[pos]
        if char == '"':
            found = strings.match(text, pos)
            if found is None:
                raise json.JSONDecodeError("unterminated string", text, pos)
            pos = found.end()
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return pos + 1
        pos += 1


def _mark(stack: list[_Frame], path: str) -> None:
    """Annotate the innermost enclosing Kubernetes object (a map with ``metadata``)."""
    for frame in reversed(stack):
        meta = frame.value.get("metadata") if isinstance(frame.value, dict) else None
        if isinstance(meta, dict) and "apiVersion" in frame.value:
            where = path[len(frame.path) :].lstrip(".") if frame.path else path
            # The field a person edits, not a thousand steps into it.
            field = ".".join(where.split(".")[:2]).split("[")[0]
            notes = meta.setdefault("annotations", {})
            if isinstance(notes, dict) and UNDECODABLE not in notes:
                notes[UNDECODABLE] = f"{field} nests deeper than {CUT_DEPTH} levels"
            return


def undecodable(body: Any) -> str | None:
    """Why ``body`` was cut by :func:`loads_bounded` (None: it decoded in full)."""
    meta = body.get("metadata") if isinstance(body, dict) else None
    notes = meta.get("annotations") if isinstance(meta, dict) else None
    found = notes.get(UNDECODABLE) if isinstance(notes, dict) else None
    return str(found) if found is not None else None


__all__ = ["CUT_DEPTH", "CUT_VALUE", "UNDECODABLE", "loads", "loads_bounded", "undecodable"]
