"""The C allocator's setting the operator runs with: at most two malloc arenas.

glibc's malloc gives a thread that allocates while another thread holds the arena an arena
of its own, up to eight per core, and each arena keeps the memory freed into it for reuse
by that arena. The operator decoded the API's responses in the Kubernetes client's thread
pool (its workers + 4 threads), so during a bulk apply each of those threads filled and
kept an arena of its own: memory the process holds (RSS) but no object uses. The client
now sends on the event loop; threads remain (a LIST's pages decoded off the loop, DNS
lookups), and the limit keeps them from doing the same. Two arenas
is what ``MALLOC_ARENA_MAX=2`` sets, the setting many Python services run with; what it
saves during a bulk apply is measured in ``docs/design/scale.md`` (issue 43). It is set by
the process itself, first thing, so
that every way of starting it (the image, ``make run``, the benchmarks) runs as the chart
deploys it. ``MALLOC_ARENA_MAX`` in the environment (glibc reads it at start) wins; a C
library without ``mallopt`` (musl) is left as it is.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

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
