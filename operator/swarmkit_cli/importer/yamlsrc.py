"""YAML documents that remember where each field came from (file and line).

PyYAML's composer keeps a start mark on every node; we construct the plain Python value
with the safe constructor and, beside it, a map from field path to line, so a warning can
say ``workspace.yaml:12: mcp_servers[0].env.BRAVE_API_KEY``. Duplicate keys (which YAML
loaders silently collapse to the last) are reported instead of dropped.

The loader is bounded, because the files come from anywhere: a document is refused (a
:class:`YamlError` naming the file) when its text is over :data:`MAX_YAML_BYTES`, when it
would hold more than :data:`MAX_NODES` values once its aliases are expanded (a dozen lines
of nested aliases, the "billion laughs", expand to billions), when it nests deeper than
:data:`MAX_DEPTH`, or when an alias refers to itself. Both caps are counted on the composed
node graph, before anything is constructed or indexed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

Path_ = tuple[str | int, ...]
#: libyaml's parser when PyYAML was built with it (10x faster; keeps the same marks).
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: The largest source document read (a Workspace is one object of at most ~1.5 MB).
MAX_YAML_BYTES = 4 * 1024 * 1024
#: Values (mapping keys and values, list items) of one document with aliases expanded; a
#: real workspace.yaml or agents.yaml has a few thousand.
MAX_NODES = 200_000
#: Nesting levels of one document.
MAX_DEPTH = 100


def format_path(path: Path_) -> str:
    """``("mcp_servers", 0, "env")`` → ``mcp_servers[0].env``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


@dataclass
class Doc:
    """One YAML document: its value, the line of every field, problems found while loading."""

    file: str
    value: Any
    lines: dict[Path_, int] = field(default_factory=dict)
    duplicates: list[tuple[Path_, int]] = field(default_factory=list)
    start_line: int = 1

    def line(self, *path: str | int) -> int:
        """Line of ``path``, or of its nearest ancestor that has one."""
        p: Path_ = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return self.start_line


class YamlError(Exception):
    """A file is not valid YAML; ``line`` is 1-based."""

    def __init__(self, file: str, line: int | None, message: str) -> None:
        super().__init__(message)
        self.file = file
        self.line = line
        self.message = message


def load_docs(text: str, file: str, line_offset: int = 0) -> list[Doc]:
    """Every document of ``text`` (empty documents skipped). Raises :class:`YamlError`."""
    size = len(text.encode("utf-8"))
    if size > MAX_YAML_BYTES:
        raise YamlError(file, None, f"{size} bytes, over the {MAX_YAML_BYTES}-byte limit; not read")
    loader = _Loader(text)
    docs: list[Doc] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _check_bounds(node, file, line_offset)
            doc = Doc(file, loader.construct_document(node), start_line=_line(node, line_offset))
            _index(node, (), doc, line_offset)
            if doc.value is not None:
                docs.append(doc)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 + line_offset if mark is not None else None
        raise YamlError(file, line, f"invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise YamlError(file, None, f"invalid YAML: {exc}") from None
    except RecursionError:  # the parser's own nesting, past any sane depth
        raise YamlError(file, None, f"nested deeper than {MAX_DEPTH} levels; not read") from None
    finally:
        loader.dispose()
    return docs


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_bounds(root: yaml.Node, file: str, offset: int) -> None:
    """Refuse a document too large or too deep once aliases are expanded, or recursive.

    An alias is the same node object as its anchor, so sizes are summed over the node graph
    once per distinct node (iteratively: the graph may be deep).
    """
    sizes: dict[int, tuple[int, int]] = {}  # id(node) → (expanded values, depth)
    open_: set[int] = set()  # nodes whose subtree is being walked
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_.discard(key)
            kids = [sizes[id(k)] for k in _children(node)]
            count = 1 + sum(k[0] for k in kids)
            depth = 1 + max((k[1] for k in kids), default=0)
            if count > MAX_NODES:
                raise YamlError(
                    file,
                    _line(root, offset),
                    f"more than {MAX_NODES} values once its aliases are expanded (an alias "
                    "bomb?); not read",
                )
            if depth > MAX_DEPTH:
                raise YamlError(
                    file, _line(node, offset), f"nested deeper than {MAX_DEPTH} levels; not read"
                )
            sizes[key] = (count, depth)
        elif key in open_:
            raise YamlError(file, _line(node, offset), "an alias refers to itself; not read")
        elif key not in sizes:
            open_.add(key)
            stack.append((node, True))
            stack.extend((k, False) for k in _children(node) if id(k) not in sizes)


def _line(node: yaml.Node, offset: int) -> int:
    return int(node.start_mark.line) + 1 + offset


def _index(node: yaml.Node, path: Path_, doc: Doc, offset: int) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            if key == "<<":  # merge keys: the merged fields point at the merge line
                continue
            child = (*path, key)
            if key in seen:
                doc.duplicates.append((child, _line(key_node, offset)))
            seen.add(key)
            doc.lines[child] = _line(key_node, offset)
            _index(value_node, child, doc, offset)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = (*path, i)
            doc.lines[child] = _line(item, offset)
            _index(item, child, doc, offset)


def walk_keys(value: Any, path: Path_ = ()) -> Iterator[Path_]:
    """Every field path inside ``value`` (mapping keys and list positions), depth first."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*path, k)
            yield from walk_keys(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield (*path, i)
            yield from walk_keys(v, (*path, i))
