"""What is left to do once a Run's outcome is recorded, or nothing will record it.

* The runner pods carry the outcome finalizer ``POD_FINALIZER``
  (:mod:`swarmkit_operator.builders.job`), so a pod and its termination message outlive a
  Job deleted by its TTL or by a person; once the outcome is in ``status`` (or the Run, or
  the Job the pod belongs to, is gone and nothing will read it) the finalizer is removed.
* A finished Run's bundle ConfigMap is labelled finished by the status write; if the
  operator died in between, :func:`ensure_finished_label` repairs it.
* A final Run is forgotten by the in-memory state, and a deleted one entirely
  (:meth:`~.state.RunState.forget`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .. import k8s
from ..builders import job as jobs
from . import status
from .model import RunView
from .state import RunState

#: Bound on the set of released pods; cleared when exceeded (a repeat removal is harmless).
RELEASED_LIMIT = 100_000


async def release_pods(st: RunState, pods: Iterable[Mapping[str, Any]]) -> None:
    """Remove the outcome finalizer from each of ``pods`` that still has it."""
    for pod in pods:
        meta = pod.get("metadata") or {}
        if jobs.POD_FINALIZER not in (meta.get("finalizers") or ()):
            continue
        key = str(meta.get("uid"))
        # The index may still list the finalizer after its removal: do not PATCH again.
        if key in st.released:
            continue
        await k8s.remove_pod_finalizer(
            str(meta.get("namespace")), str(meta.get("name")), jobs.POD_FINALIZER
        )
        st.released.add(key)
        if len(st.released) > RELEASED_LIMIT:
            st.released.clear()


async def ensure_finished_label(st: RunState, run: RunView) -> None:
    """Label the bundle of a finished Run if a crash skipped it (its pins are released)."""
    cm = run.status.get("bundleConfigMap")
    if not cm or st.idx.bundles is None:
        return
    for entry in st.idx.bundles.get(run.namespace) or ():
        if entry.get("bundle") == cm and not entry.get("finished"):
            await status.label_finished(st, run.namespace, str(cm))
            return


async def finished(st: RunState, run: RunView, pods: Iterable[Mapping[str, Any]]) -> None:
    """A final Run: its pods released, its bundle labelled, nothing more remembered of it
    (its overlay goes by itself once the index shows the final write)."""
    await release_pods(st, pods)
    await ensure_finished_label(st, run)
    st.forget(run.uid)


async def run_gone(
    st: RunState, uid: str, pods: Iterable[Mapping[str, Any]], deleted: bool
) -> None:
    """The Run is gone (``deleted``) or being deleted: its Job and pods follow by garbage
    collection, but nothing will record their outcome, so release them."""
    await release_pods(st, pods)
    st.forget(uid, gone=deleted)
