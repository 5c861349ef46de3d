"""The operator SIGKILLed at seeded random points while objects and Runs reconcile.

Objects (Skills, Agents, Topologies, a Workspace, some deliberately broken) and Runs are
applied in chunks; after each chunk the operator is SIGKILLed at a random moment (seeded),
some objects are applied or edited while it is down, and it is started again. Afterwards
every object carries the condition its input deserves at its current generation, every
Run succeeded with the right output and exactly one Job (plus any recorded recreations),
and nothing is orphaned or duplicated (see :func:`tests.chaos.support.leftovers`).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube

from ..integration.runs_support import GROUP, VERSION
from .support import (
    ChaosOperator,
    converge,
    create,
    make_secret,
    record,
    rng,
    size,
    wait_clean,
    workspace,
    world,
)

KILLS = size(3, 5)
OBJECTS = size(60, 500)
RUNS = size(6, 50)


@pytest.mark.timeout(size(420, 1500))
def test_operator_sigkilled_at_random_points_converges_with_nothing_lost(
    cluster: LocalCluster, kube: Kube, crds: Any, namespace: str
) -> None:
    ns = namespace
    secret = make_secret(kube, ns)
    w = world(OBJECTS, RUNS, "kill")
    r = rng("kill-schedule")
    op = ChaosOperator(cluster.kubeconfig, {"watchNamespaces": [ns]})
    op.start()
    create(kube, ns, workspace("chaos-keys"))
    assert secret  # referenced by the Workspace; the scan at the end looks for it
    chunks = [w.docs[i :: KILLS + 1] for i in range(KILLS + 1)]
    edited: list[str] = []
    kill_points = []
    started = time.monotonic()
    try:
        for k in range(KILLS):
            for doc in chunks[k]:
                create(kube, ns, doc)
            delay = r.uniform(0.1, 3.0)
            time.sleep(delay)  # mid-reconcile: the chunk is still being worked on
            op.kill()
            kill_points.append(round(delay, 2))
            # while it is down: more objects, and edits of skills it already rendered
            down = chunks[k + 1][: len(chunks[k + 1]) // 2]
            chunks[k + 1] = chunks[k + 1][len(down) :]
            for doc in down:
                create(kube, ns, doc)
            skills = [
                d["metadata"]["name"] for c in chunks[: k + 1] for d in c if d["kind"] == "Skill"
            ]
            for name in r.sample(skills, k=min(3, len(skills))):
                kube.custom.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    ns,
                    "skills",
                    name,
                    {"spec": {"instructions": f"# {name}\n\nEdited after kill {k}.\n"}},
                )
                edited.append(name)
            time.sleep(r.uniform(0.0, 1.5))
            op.start()
        for doc in chunks[KILLS]:
            create(kube, ns, doc)
        converged = converge(kube, ns, w, timeout=size(240, 900))
        wait_clean(kube, ns, timeout=120)
    except BaseException:
        print(op.tail(80))
        raise
    finally:
        op.stop()
    total = time.monotonic() - started
    record(
        "operator_killed",
        {
            "objects": len(w.expect),
            "runs": RUNS,
            "kills": KILLS,
            "killAfterSeconds": kill_points,
            "skillsEditedWhileDown": len(edited),
            "convergedSecondsAfterLastChunk": round(converged, 1),
            "totalSeconds": round(total, 1),
        },
    )
