"""Hypothesis strategies generated from the CRDs' own OpenAPI schemas (issue 47 item 6).

:func:`kinds` reads every generated CRD of the chart (``charts/swarmkit-operator/templates/
crds/*.yaml``, Helm's ``{{ }}`` lines dropped) and :func:`spec_strategy` turns a kind's
``spec`` schema into a strategy: objects with their required properties and some of the
optional ones, arrays up to a few items, strings from their ``enum``, ``pattern`` (as a
regular expression) and ``maxLength``, numbers within their bounds, free JSON where the
schema preserves unknown fields. CEL rules are not modelled: a generated spec may break
one, and the apiserver then refuses it naming the field, which is one of the outcomes the
fuzz tests accept. :func:`hostile` mutates a spec the way a careless or hostile author
would (a wrong type, a value nested deep, a long string, a huge list) at one place; the
kind's own examples (``examples/*.yaml``, which pass every CEL rule) are mutated too, so
kinds whose CEL rules refuse almost every generated spec (Funnel) are fuzzed past admission.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
CHART_CRDS = REPO / "charts" / "swarmkit-operator" / "templates" / "crds"
#: Bounds that keep one generated object small enough to post hundreds.
MAX_ITEMS = 3
MAX_TEXT = 40
Strategy = st.SearchStrategy[Any]


@dataclass(frozen=True)
class Kind:
    """One CRD: its kind, plural and the OpenAPI schema of ``spec``."""

    kind: str
    plural: str
    spec: dict[str, Any]
    name_pattern: str | None


def _crd(path: Path) -> dict[str, Any]:
    text = "\n".join(line for line in path.read_text().splitlines() if "{{" not in line)
    doc: dict[str, Any] = yaml.safe_load(text)
    return doc


@cache
def kinds() -> dict[str, Kind]:
    """Every kind the chart's CRDs declare."""
    out = {}
    for path in sorted(CHART_CRDS.glob("*.yaml")):
        crd = _crd(path)
        version = crd["spec"]["versions"][0]
        schema = version["schema"]["openAPIV3Schema"]
        name = ((schema.get("properties") or {}).get("metadata") or {}).get("properties") or {}
        names = crd["spec"]["names"]
        out[names["kind"]] = Kind(
            names["kind"],
            names["plural"],
            schema["properties"]["spec"],
            (name.get("name") or {}).get("pattern"),
        )
    return out


_KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_.0123456789", min_size=1, max_size=12)
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.text(max_size=MAX_TEXT),
)
#: Free JSON (a ``x-kubernetes-preserve-unknown-fields`` subtree): a few levels of anything.
FREE_JSON = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=MAX_ITEMS), st.dictionaries(_KEY, inner, max_size=MAX_ITEMS)
    ),
    max_leaves=10,
)


def _string(schema: dict[str, Any]) -> Strategy:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    low = int(schema.get("minLength", 0))
    high = int(schema.get("maxLength", max(low, MAX_TEXT)))
    fits: Callable[[str], bool] = lambda s: low <= len(s) <= high  # noqa: E731
    if schema.get("format") == "date-time":
        return st.datetimes().map(lambda d: d.replace(microsecond=0).isoformat() + "Z")
    if "pattern" in schema:
        try:
            re.compile(schema["pattern"])
        except re.error:
            return st.text(max_size=min(high, MAX_TEXT)).filter(fits)
        return st.from_regex(schema["pattern"], fullmatch=True).filter(fits)
    return st.text(min_size=low, max_size=max(low, min(high, MAX_TEXT)))


def _number(schema: dict[str, Any], integer: bool) -> Strategy:
    low = schema.get("minimum")
    high = schema.get("maximum")
    if schema.get("exclusiveMinimum") and low is not None:
        low = low + (1 if integer else 1e-9)
    if schema.get("exclusiveMaximum") and high is not None:
        high = high - (1 if integer else 1e-9)
    if integer:
        return st.integers(
            int(low) if low is not None else -(10**6), int(high) if high is not None else 10**6
        )
    return st.floats(
        low if low is not None else -1e6, high if high is not None else 1e6, allow_nan=False
    )


def _array(schema: dict[str, Any]) -> Strategy:
    items = from_schema(schema.get("items") or {})
    low = int(schema.get("minItems", 0))
    high = max(low, min(int(schema.get("maxItems", MAX_ITEMS)), MAX_ITEMS))
    keys = schema.get("x-kubernetes-list-map-keys")
    if keys:
        return st.lists(
            items, min_size=low, max_size=high, unique_by=lambda i: tuple(i.get(k) for k in keys)
        )
    if schema.get("x-kubernetes-list-type") == "set":
        return st.lists(items, min_size=low, max_size=high, unique=True)
    return st.lists(items, min_size=low, max_size=high)


def _object(schema: dict[str, Any]) -> Strategy:
    props: dict[str, Any] = schema.get("properties") or {}
    if not props and schema.get("x-kubernetes-preserve-unknown-fields"):
        return st.dictionaries(_KEY, FREE_JSON, max_size=MAX_ITEMS)
    extra = schema.get("additionalProperties")
    if not props and isinstance(extra, dict):
        high = min(int(schema.get("maxProperties", MAX_ITEMS)), MAX_ITEMS)
        keys = from_schema(schema["propertyNames"]) if "propertyNames" in schema else _KEY
        return st.dictionaries(keys, from_schema(extra), max_size=high)
    required = set(schema.get("required") or ())
    return st.fixed_dictionaries(
        {k: from_schema(v) for k, v in props.items() if k in required},
        optional={k: from_schema(v) for k, v in props.items() if k not in required},
    )


def from_schema(schema: dict[str, Any]) -> Strategy:
    """A strategy for values ``schema`` (a structural OpenAPI v3 schema) describes."""
    if "enum" in schema and schema.get("type") != "string":
        return st.sampled_from(schema["enum"])
    if schema.get("x-kubernetes-int-or-string"):
        return st.one_of(st.integers(0, 1000), st.text(max_size=10))
    kind = schema.get("type")
    if kind == "string":
        return _string(schema)
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return _array(schema)
    if kind == "object" or "properties" in schema:
        return _object(schema)
    return FREE_JSON  # no type: anything


def spec_strategy(kind: str) -> Strategy:
    """Specs of ``kind`` as its CRD schema describes them."""
    return from_schema(kinds()[kind].spec)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*path, i)))
    return out


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, new)}
    out = list(value)
    out[head] = _replaced(value[head], rest, new)
    return out


def _nested(levels: int) -> Any:
    value: Any = "bottom"
    for i in range(levels):
        value = {"a": value} if i % 2 else [value]
    return value


#: What one hostile edit puts somewhere: a wrong type, deep nesting, size, odd text.
HOSTILE_VALUES = st.one_of(
    _SCALAR,
    st.integers(70, 400).map(_nested),
    st.just("x" * 300_000),
    st.just(["x"] * 5_000),
    st.just({f"k{i}": i for i in range(2_000)}),
    st.sampled_from(["", "\u0000", "é" * 1000, "../../etc/passwd", "{{ .Values }}", "${HOME}"]),
)


@st.composite
def hostile(draw: st.DrawFn, base: Strategy) -> Any:
    """A value from ``base`` with one place (maybe the whole) replaced by a hostile one."""
    value = draw(base)
    path = draw(st.sampled_from(_paths(value)))
    return _replaced(value, path, draw(HOSTILE_VALUES))


@cache
def example_specs(kind: str) -> tuple[dict[str, Any], ...]:
    """The specs of ``kind`` in ``examples/*.yaml`` (none for the operator-made kinds)."""
    docs = [
        d
        for path in sorted((REPO / "examples").glob("*.yaml"))
        for d in yaml.safe_load_all(path.read_text())
        if d and d.get("kind") == kind
    ]
    return tuple(d["spec"] for d in docs)


def fuzz_spec(kind: str) -> Strategy:
    """What the fuzz tests post as a ``kind``'s spec: schema-shaped, or hostile at a place,
    or one of its examples as it is or made hostile at a place."""
    base = spec_strategy(kind)
    examples = example_specs(kind)
    if not examples:
        return st.one_of(base, hostile(base))
    seeds = st.sampled_from(examples)
    return st.one_of(base, hostile(base), seeds, hostile(seeds), hostile(seeds))


__all__ = [
    "FREE_JSON",
    "Kind",
    "example_specs",
    "from_schema",
    "fuzz_spec",
    "hostile",
    "kinds",
    "spec_strategy",
]
