"""Marks on functions for the composition root: nothing is registered at import.

``@index`` (:mod:`.indexes`) and ``@on_event`` (:mod:`.handlers.events`) only attach a
mark to the function they decorate. The composition root (:mod:`.handlers.root`) collects
the marks of the modules it names, in the order it names them, and builds the index specs
and the watch streams from them (with the kinds it declares: ``root.KINDS``). So what the
operator runs is written in one place, as code, and no module-level registry changes when
some module happens to be imported (a test importing a handler module twice, or in another
order, wires nothing by accident).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any, TypeVar

F = TypeVar("F")

_ATTR = "__swarmkit_marks__"


def mark(fn: F, value: Any) -> F:
    """Attach ``value`` to ``fn`` (a function may carry several marks: stacked decorators,
    kept in the order they were applied, innermost first)."""
    marks: list[Any] = fn.__dict__.setdefault(_ATTR, [])
    marks.append(value)
    return fn


def marks_of(fn: Any) -> list[Any]:
    """The marks on ``fn``, in the order they were applied."""
    return list(getattr(fn, _ATTR, ()))


def marked(module: ModuleType) -> Iterator[tuple[Any, Any]]:
    """Every (function, mark) defined in ``module``, in definition order (a function a
    module merely imports is collected with the module that defines it)."""
    for value in list(vars(module).values()):
        if getattr(value, "__module__", None) != module.__name__:
            continue
        for one in marks_of(value):
            yield value, one
