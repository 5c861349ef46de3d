"""The bookkeeping that makes "every input field is mapped or reported" hold.

A :class:`Fields` wraps one source mapping. Mappers ``take`` the keys they translate and
name the ones they cannot (``unsupported``); :meth:`Fields.finish` warns about every key
nobody took. :func:`check` validates a built piece with its ``swarmkit_api`` model (the
same rules, CEL twins included, as admission) and reports each error at the source field
it came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from .findings import Report
from .yamlsrc import Doc, Path_, format_path

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])([A-Z])")


def to_camel(name: str) -> str:
    """``card_url`` → ``cardUrl`` (snake_case keys of the sources → the API's camelCase)."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def to_snake(name: str) -> str:
    return _CAMEL_BOUNDARY.sub(lambda m: "_" + m.group(1).lower(), name)


@dataclass(frozen=True)
class Src:
    """A place in a source document: the document and the path of a value inside it."""

    doc: Doc
    path: Path_ = ()

    @property
    def file(self) -> str:
        return self.doc.file

    @property
    def line(self) -> int:
        return self.doc.line(*self.path)

    def at(self, *more: str | int) -> Src:
        return Src(self.doc, (*self.path, *more))

    def field(self, *more: str | int) -> str:
        return format_path((*self.path, *more))

    def value(self) -> Any:
        v = self.doc.value
        for part in self.path:
            v = v[part]
        return v


class Fields:
    """One source mapping whose keys must each be taken, declared unsupported, or warned."""

    def __init__(self, report: Report, src: Src, value: Any | None = None) -> None:
        self.report = report
        self.src = src
        raw = src.value() if value is None else value
        self.data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        self.taken: set[str] = set()

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def take(self, key: str, default: Any = None) -> Any:
        self.taken.add(key)
        return self.data.get(key, default)

    def take_all(self) -> dict[str, Any]:
        self.taken.update(self.data)
        return dict(self.data)

    def sub(self, key: str) -> Fields:
        """The nested mapping at ``key`` (taken); an empty one when absent."""
        self.taken.add(key)
        return Fields(self.report, self.src.at(key), self.data.get(key) or {})

    def unsupported(self, key: str, why: str) -> None:
        if key in self.data:
            self.taken.add(key)
            self.warn(key, f"not supported: {why}; not imported")

    def warn(self, key: str | int | None, message: str) -> None:
        parts = () if key is None else (key,)
        self.report.warn(
            self.src.file,
            self.src.doc.line(*self.src.path, *parts),
            self.src.field(*parts),
            message,
        )

    def error(self, key: str | int | None, message: str) -> None:
        parts = () if key is None else (key,)
        self.report.error(
            self.src.file,
            self.src.doc.line(*self.src.path, *parts),
            self.src.field(*parts),
            message,
        )

    def finish(self, known: str = "") -> None:
        """Warn about every key no mapper took."""
        hint = f" (known: {known})" if known else ""
        for key in self.data:
            if key not in self.taken:
                self.warn(key, f"unknown field, not imported{hint}")

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter(self.data.items())


def check(
    report: Report,
    model: type[BaseModel],
    data: dict[str, Any],
    src: Src,
    what: str,
    rename: dict[str, str] | None = None,
) -> bool:
    """Validate ``data`` (camelCase, as it will be applied) with ``model``.

    Each error is reported at the source field it came from: the camelCase location is
    turned back into snake_case under ``src`` (``rename`` maps API field names whose
    source name differs, e.g. ``{"name": "id"}``), and the nearest source line is used.
    """
    try:
        model.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function"))]
            ctx = err.get("ctx") or {}
            extra = str(ctx.get("field_path", "")).lstrip(".")
            if extra:
                loc.extend(extra.split("."))
            source: list[str | int] = []
            for part in loc:
                if isinstance(part, int):
                    source.append(part)
                else:
                    mapped = (rename or {}).get(part) if not source else None
                    source.append(mapped or to_snake(part))
            api_path = ".".join(str(p) for p in loc) or "(root)"
            msg = err["msg"].removeprefix("Value error, ")
            report.error(
                src.file,
                src.doc.line(*src.path, *source),
                src.field(*source),
                f"{what}: {msg} (API field {api_path})",
            )
        return False
    return True
