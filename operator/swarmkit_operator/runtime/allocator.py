"""The memory settings the operator runs with: at most two malloc arenas, and a cyclic
garbage collector that leaves the long-lived objects alone.

**Malloc arenas.**

glibc's malloc gives a thread that allocates while another thread holds the arena an arena
of its own, up to eight per core, and each arena keeps the memory freed into it for reuse
by that arena. The operator decoded the API's responses in the Kubernetes client's thread
pool (its workers + 4 threads), so during a bulk apply each of those threads filled and
kept an arena of its own: memory the process holds (RSS) but no object uses. The client
now sends on the event loop; threads remain (a LIST's pages decoded off the loop, DNS
lookups), and the limit keeps them from doing the same. Two arenas
is what ``MALLOC_ARENA_MAX=2`` sets, the setting many Python services run with; what it
saves during a bulk apply is measured in ``docs/design/scale.md`` (issue 43). It is set by
the process itself, first thing, so that every way of starting it (the image, ``make run``,
the benchmarks, a plain ``kopf run``: the composition root's fallback) runs as the chart
deploys it. ``MALLOC_ARENA_MAX`` in the environment (glibc reads it at start) wins; a C
library without ``mallopt`` (musl) is left as it is.

**The cyclic collector.** CPython's collector walks every container object of a generation
it collects, and a full collection (every 10th of the middle generation's, once the objects
new since the last one are a quarter of those that survived it) walks them all. A restart
holds every listed object at once (the listing until its stream delivered it, a view of each
in the indexes): millions of dicts, lists and tuples that nothing cyclic refers to and that
live as long as their objects. While the start-up LIST filled the indexes of 5,000 Skills
(12,100 objects with their renders), the collector was 0.6 s of the 1.7 s of CPU it took,
and 3.0 s of 6.9 s at 20,000: a cost that grows faster than the objects, which a bare
client's LIST (it keeps nothing) does not pay. So the collector is paused while the
start-up LIST fills the indexes (:func:`collector_paused`), and what the imports and that
listing left is frozen (:func:`freeze_survivors`, ``gc.freeze``): moved out of every
generation, never walked again. Frozen objects are still freed by their reference counts
(a view dropped with its object, a listing once delivered); only a cycle among them would
stay, and the operator's start-up leaves none that grows.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
from collections.abc import Iterator, Mapping

#: ``M_ARENA_MAX`` in glibc's ``malloc.h``.
M_ARENA_MAX = -8
ARENAS = 2
ARENA_ENV = "MALLOC_ARENA_MAX"


def limit_malloc_arenas(env: Mapping[str, str], arenas: int = ARENAS) -> bool:
    """Limit glibc's malloc to ``arenas`` arenas unless ``$MALLOC_ARENA_MAX`` decides;
    whether this call set it."""
    if env.get(ARENA_ENV):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))


def freeze_survivors() -> None:
    """Move every object alive now out of the collector's generations (``gc.freeze``):
    the modules, classes and functions the imports made, the indexes a start-up listed.
    Later collections walk only what was made after this."""
    gc.freeze()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off for the block (reference counting still frees), then what
    the block left alive frozen (:func:`freeze_survivors`) and the collector on again if
    it was. For the start-up LIST: no collection walks the growing indexes while they
    fill, and none walks them afterwards. A block that fails freezes nothing: its
    exception's traceback holds the half-filled indexes in a cycle of frames, which
    frozen would never be collected (kopf retries a failed start: one leak per retry)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        freeze_survivors()
    finally:
        if enabled:
            gc.enable()
