"""Users editing specs while the operator writes status (hundreds of edits).

Two users edit an Agent's spec and the Skill it grants as fast as the apiserver lets them,
while the operator re-renders and writes status after every change. A watch records every
version of both objects. Nothing a user wrote may be lost (the final spec is the last edit,
every edit bumped the generation once), and status never regresses: ``observedGeneration``
never goes back, and no condition ever claims a generation newer than the object's or
older than one it already reported.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for

from ..integration.runs_support import GROUP, VERSION
from .support import ChaosOperator, agent, create, record, rng, size, skill, workspace

EDITS = size(150, 600)  # per object


def _watch(
    kube: Kube, ns: str, plural: str, seen: list[dict[str, Any]], stop: threading.Event
) -> None:
    from kubernetes import watch

    rv = None
    while not stop.is_set():
        w = watch.Watch()
        try:
            kwargs: dict[str, Any] = {"timeout_seconds": 5}
            if rv:
                kwargs["resource_version"] = rv
            for ev in w.stream(
                kube.custom.list_namespaced_custom_object, GROUP, VERSION, ns, plural, **kwargs
            ):
                o = ev["object"]
                rv = o["metadata"]["resourceVersion"]
                seen.append(o)
                if stop.is_set():
                    break
        except Exception:
            rv = None  # too old or dropped: start from a fresh list (re-seen versions are fine)
        finally:
            w.stop()


def _regressions(history: list[dict[str, Any]]) -> list[str]:
    problems = []
    best_observed = 0
    best_cond: dict[str, int] = {}
    last_rv = 0
    for o in history:
        rv = int(o["metadata"]["resourceVersion"])
        if rv <= last_rv:
            continue  # a replay after a reconnect
        last_rv = rv
        gen = int(o["metadata"]["generation"])
        st = o.get("status") or {}
        observed = int(st.get("observedGeneration") or 0)
        if observed < best_observed:
            problems.append(f"rv {rv}: observedGeneration {observed} after {best_observed}")
        if observed > gen:
            problems.append(f"rv {rv}: observedGeneration {observed} > generation {gen}")
        best_observed = max(best_observed, observed)
        for c in st.get("conditions") or ():
            cg = int(c.get("observedGeneration") or 0)
            if cg > gen:
                problems.append(f"rv {rv}: {c['type']} at generation {cg} > {gen}")
            if cg < best_cond.get(c["type"], 0):
                problems.append(
                    f"rv {rv}: {c['type']} went back to generation {cg} "
                    f"after {best_cond[c['type']]}"
                )
            best_cond[c["type"]] = max(best_cond.get(c["type"], 0), cg)
    return problems


@pytest.mark.timeout(size(300, 900))
def test_user_edits_during_status_writes_are_never_lost_and_status_never_regresses(
    cluster: LocalCluster, kube: Kube, crds: Any, namespace: str
) -> None:
    ns = namespace
    # A re-LIST every 2 s (the resync; normally 10 min, and once 30 s after start-up) races
    # the watch: a LIST older than an event must not roll an object back in the indexes.
    op = ChaosOperator(
        cluster.kubeconfig, {"watchNamespaces": [ns]}, env={"SWARMKIT_RESYNC_SECONDS": "2"}
    )
    op.start()
    stop = threading.Event()
    seen: dict[str, list[dict[str, Any]]] = {"agents": [], "skills": []}
    watchers = [
        threading.Thread(target=_watch, args=(kube, ns, p, seen[p], stop), daemon=True)
        for p in seen
    ]
    for t in watchers:
        t.start()
    r = rng("conflicts")
    errors: list[BaseException] = []
    try:
        create(kube, ns, workspace())
        create(kube, ns, skill("hot"))
        create(kube, ns, agent("busy", ["hot"]))

        def edit(plural: str, name: str, field: str) -> None:
            try:
                for i in range(EDITS):
                    value = f"edit {i} of {name}"
                    if plural == "skills":
                        value = f"# hot\n\n{value}\n"
                    kube.custom.patch_namespaced_custom_object(
                        GROUP, VERSION, ns, plural, name, {"spec": {field: value}}
                    )
                    if r.random() < 0.1:
                        time.sleep(r.uniform(0.0, 0.2))  # let some reconciles finish
            except BaseException as exc:
                errors.append(exc)

        started = time.monotonic()
        editors = [
            threading.Thread(target=edit, args=("agents", "busy", "systemPrompt")),
            threading.Thread(target=edit, args=("skills", "hot", "instructions")),
        ]
        for t in editors:
            t.start()
        for t in editors:
            t.join(timeout=600)
        edit_seconds = time.monotonic() - started
        assert not errors, errors

        def settled() -> bool:
            for plural, name in (("agents", "busy"), ("skills", "hot")):
                o = kube.custom.get_namespaced_custom_object(GROUP, VERSION, ns, plural, name)
                st = o.get("status") or {}
                ready = [c for c in st.get("conditions") or () if c["type"] == "Ready"]
                gen = o["metadata"]["generation"]
                if st.get("observedGeneration") != gen or not ready:
                    return False
                if ready[0]["status"] != "True" or ready[0]["observedGeneration"] != gen:
                    return False
            return True

        wait_for(settled, size(60, 180), interval=0.5, message=op.tail)
        time.sleep(1)  # let the watches catch the last writes
    finally:
        stop.set()
        for t in watchers:
            t.join(timeout=10)
        op.stop()

    final_agent = kube.custom.get_namespaced_custom_object(GROUP, VERSION, ns, "agents", "busy")
    final_skill = kube.custom.get_namespaced_custom_object(GROUP, VERSION, ns, "skills", "hot")
    # no lost user edit: the last one is what is stored, and each one made a generation
    assert final_agent["spec"]["systemPrompt"] == f"edit {EDITS - 1} of busy"
    assert final_skill["spec"]["instructions"] == f"# hot\n\nedit {EDITS - 1} of hot\n"
    assert final_agent["metadata"]["generation"] == EDITS + 1
    assert final_skill["metadata"]["generation"] == EDITS + 1
    # the agent's render follows the skill's last content, not an intermediate one
    [resolved] = final_agent["status"]["resolvedSkills"]
    assert resolved["contentHash"] == final_skill["status"]["contentHash"]
    problems = {p: _regressions(h) for p, h in seen.items()}
    assert problems == {"agents": [], "skills": []}
    status_versions = {
        p: len({o["metadata"]["resourceVersion"] for o in h}) for p, h in seen.items()
    }
    record(
        "conflicts",
        {
            "userEditsPerObject": EDITS,
            "editSeconds": round(edit_seconds, 1),
            "versionsWatched": status_versions,
            "statusRegressions": 0,
        },
    )
