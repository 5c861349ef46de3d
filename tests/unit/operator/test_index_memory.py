"""What one indexed object costs the operator's memory, bounded (issue 43: 20,000 Skills,
24,401 objects and their 24,000 rendered ConfigMaps, within 400 MB).

Every index function of the operator (the composition root's wiring) over the objects
``bench_scale.py`` applies, shaped as the watch delivers them once Ready (status, field
managers), each decoded from its own JSON as a watch event is; tracemalloc counts what
the indexes keep.
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

from swarmkit_operator.handlers.root import wiring
from swarmkit_operator.indexes import Indexes, IndexId, compact

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import bench_scale

NS = "bench-scale-0a1b2c"
WHEN = "2026-12-06T05:30:00Z"
PLURALS = {"Skill": "skills", "Agent": "agents", "Topology": "topologies"}
#: Bytes the indexes keep per indexed object (the CRs and their rendered ConfigMaps):
#: 4,170 before issue 43's compaction (each event's strings kept as decoded), 2,740 after.
BOUND = 3100


def _managed(manager: str, subresource: str | None, fields: dict[str, Any]) -> dict[str, Any]:
    entry = {
        "manager": manager,
        "operation": "Apply" if subresource else "Update",
        "apiVersion": "swarmkit.dev/v1alpha1",
        "time": WHEN,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    return {**entry, "subresource": subresource} if subresource else entry


def _status(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "Rendered",
        "message": f"rendered into {kind.lower()}-{name}-0123abcd",
        "lastTransitionTime": WHEN,
        "observedGeneration": 1,
    }
    status: dict[str, Any] = {"observedGeneration": 1, "conditions": [ready]}
    render = f"{kind.lower()}-{name}-0123abcd"
    if kind == "Skill":
        status |= {
            "contentHash": "sha256:" + name.encode().hex().ljust(64, "0"),
            "version": "1.0.0",
            "renderedConfigMap": render,
            "scripts": [],
            "grantedBy": {"count": 5, "agents": [f"agent-{j:04d}" for j in range(5)]},
            "usage": {"runsGranted": 0, "runsLoaded": 0, "scriptRuns": 0, "scriptFailures": 0},
        }
    elif kind == "Agent":
        status |= {
            "version": "0123abcd",
            "renderedConfigMap": render,
            "resolvedSkills": [
                {"name": s, "renderedConfigMap": f"skill-{s}-0123abcd", "contentHash": "sha256:x"}
                for s in spec["skills"]
            ],
        }
    else:
        status["version"] = "0123abcd"
    return status


def watched(n: int) -> list[tuple[str, str]]:
    """(plural, JSON) of every object of ``bench_scale.manifests(n)`` and its render."""
    out: list[tuple[str, str]] = []
    for i, doc in enumerate(bench_scale.manifests(n)):
        kind, name = doc["kind"], doc["metadata"]["name"]
        meta = {
            "name": name,
            "namespace": NS,
            "uid": f"{i:08x}-1111-2222-3333-444455556666",
            "resourceVersion": str(100000 + i),
            "generation": 1,
            "creationTimestamp": WHEN,
            "managedFields": [
                _managed("python", None, {"f:spec": {".": {}, "f:instructions": {}}}),
                _managed("swarmkit-operator", "status", {"f:status": {"f:conditions": {}}}),
            ],
        }
        body = {**doc, "metadata": meta, "status": _status(kind, name, doc["spec"])}
        out.append((PLURALS[kind], json.dumps(body)))
        if kind == "Topology":
            continue
        component = kind.lower()
        labels = {
            "app.kubernetes.io/managed-by": "swarmkit-operator",
            "swarmkit.dev/component": component,
            f"swarmkit.dev/{component}": name,
        }
        render = {
            "metadata": {
                "name": f"{component}-{name}-0123abcd",
                "namespace": NS,
                "uid": f"{i:08x}-9999-2222-3333-444455556666",
                "resourceVersion": str(200000 + i),
                "creationTimestamp": WHEN,
                "labels": labels,
            }
        }
        out.append(("configmaps", json.dumps(render)))
    return out


def kept_bytes(objects: list[tuple[str, str]]) -> tuple[Indexes, int]:
    gc.collect()
    tracemalloc.start()
    try:
        indexes = wiring().indexes()
        for plural, text in objects:
            indexes.update(plural, json.loads(text))
        gc.collect()
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return indexes, kept


def test_an_indexed_object_costs_at_most_its_bound() -> None:
    objects = watched(1000)  # 1,221 objects and 1,200 rendered ConfigMaps
    indexes, kept = kept_bytes(objects)
    per_object = kept / len(objects)
    assert per_object <= BOUND, f"{per_object:.0f} bytes per indexed object (bound {BOUND})"
    # The bound is per object, not a constant that a larger N would dilute.
    assert len(indexes.keys(IndexId.SKILL_VIEWS)) == 1000


def test_views_of_different_objects_share_their_strings() -> None:
    indexes = wiring().indexes()
    for plural, text in watched(10):
        indexes.update(plural, json.loads(text))
    one, other = (
        indexes.values(IndexId.SKILL_VIEWS, (NS, name))[0]
        for name in ("skill-00001", "skill-00002")
    )
    assert (
        one["status"]["conditions"][0]["lastTransitionTime"]
        is (other["status"]["conditions"][0]["lastTransitionTime"])
    )
    ((key_one, key_other),) = [
        [k for k in indexes.keys(IndexId.SKILL_VIEWS) if k[1] in ("skill-00001", "skill-00002")]
    ]
    assert key_one[0] is key_other[0]  # the namespace


def test_compaction_keeps_values_equal_and_of_the_same_types() -> None:
    value = {"a": [{"b": ("c", 1, None, 2.5)}], "d": {"e": True}, 3: "f"}
    out = compact(value)
    assert out == value
    assert type(out["a"]) is list and type(out["a"][0]["b"]) is tuple
    decoded = json.loads('{"reason": "Rendered"}')["reason"]
    assert decoded is not "Rendered"  # noqa: F632 (a decode's string is its own object)
    assert compact(decoded) is sys.intern("Rendered")
