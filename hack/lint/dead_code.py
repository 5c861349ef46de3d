"""Fail on dead code: a function, method, property, class or import nothing uses (``make lint``).

vulture (from the ``dev`` extra) reads the code with ``ast`` and reports every name defined
and never used. Two scans, because "used" means something different for each:

* the product (operator, API, CLI, runner) with the generators (``hack/swarmkit_codegen``,
  which render the chart from product tables such as ``rbac.chart_template``): a product
  function only a test calls is dead;
* the dev cluster (``hack/swarmkit_devcluster``) with the tests and benchmarks, whose
  library it is.

What vulture cannot see is a call by reflection. Functions collected through a decorator
are skipped by the decorator (:data:`COLLECTED`: the marks the composition root collects,
kopf's, pydantic's validators). Variables and attributes are not reported: nearly all are
model or dataclass fields read by serialization, or settings of a third-party object set by
name. Anything else called by reflection (a protocol method a library calls) is listed in
``dead-code-whitelist.txt`` beside this file, one ``path::name  # why`` per line; an entry
that no longer matches anything is an error too, so the list stays exact.
"""

from __future__ import annotations

import sys
from pathlib import Path

import vulture

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
WHITELIST = HERE / "dead-code-whitelist.txt"

PRODUCT = (
    "operator/swarmkit_api",
    "operator/swarmkit_operator",
    "operator/swarmkit_cli",
    "runtime_image/swarmkit_runner",
    "hack/swarmkit_codegen",
)
DEV_CLUSTER = ("hack/swarmkit_devcluster",)
DEV_CLUSTER_USERS = ("tests", "bench")

#: Decorators that hand the function to something that calls it by reflection.
COLLECTED = (
    "@index",  # swarmkit_operator.indexes: the composition root collects the marks
    "@reconciler",  # reconcile.controller: likewise
    "@on_event",  # handlers.events: likewise
    "@kopf.*",  # kopf's start-up, clean-up and probe handlers
    "@*validator",  # pydantic's field_validator / model_validator
    "@*.fixture",  # pytest fixtures (the dev cluster's, used by name)
)
REPORTED = frozenset({"function", "method", "property", "class", "import", "unreachable_code"})


def scan(paths: tuple[str, ...], reported: tuple[str, ...]) -> list[tuple[str, str, int]]:
    """(path::name, kind, line) of every unused item of ``reported`` paths."""
    finder = vulture.Vulture(ignore_decorators=list(COLLECTED))
    finder.scavenge([str(REPO / p) for p in paths])
    out = []
    for item in finder.get_unused_code(min_confidence=60):
        rel = Path(item.filename).resolve().relative_to(REPO).as_posix()
        if item.typ in REPORTED and rel.startswith(reported):
            out.append((f"{rel}::{item.name}", item.typ, item.first_lineno))
    return out


def read_whitelist(path: Path) -> dict[str, str]:
    entries: dict[str, str] = {}
    for line in path.read_text().splitlines():
        where, _, why = line.partition("#")
        if where.strip():
            if not why.strip():
                raise SystemExit(f"{path.name}: {where.strip()} says no why")
            entries[where.strip()] = why.strip()
    return entries


def problems(found: list[tuple[str, str, int]], allowed: dict[str, str]) -> list[str]:
    out = [
        f"{where.split('::')[0]}:{line}: unused {kind} '{where.split('::')[1]}'"
        for where, kind, line in found
        if where not in allowed
    ]
    seen = {where for where, _, _ in found}
    stale = [w for w in allowed if w not in seen]
    out += [f"{WHITELIST.name}: {w} is used now (or gone): drop it" for w in stale]
    return out


def main() -> int:
    found = scan(PRODUCT, PRODUCT) + scan(DEV_CLUSTER + DEV_CLUSTER_USERS, DEV_CLUSTER)
    wrong = problems(found, read_whitelist(WHITELIST))
    for line in wrong:
        print(line)
    if wrong:
        print("dead code: remove it, or whitelist a reflection call with its reason")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
