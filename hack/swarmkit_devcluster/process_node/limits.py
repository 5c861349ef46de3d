"""Resource limits of a container, enforced as far as the machine allows.

With a writable cgroup v2 hierarchy that delegates the ``memory`` and ``cpu``
controllers (:func:`cgroup_parent`), every container gets its own cgroup
(``memory.max``, ``cpu.max``); the launcher joins it before ``exec``. Otherwise
(cgroup v1, or v2 without those controllers: this development machine) the memory limit
becomes ``RLIMIT_DATA`` (private writable memory: an allocation beyond it fails, so the
process sees ``MemoryError``/``ENOMEM`` rather than the kernel's OOM kill) and CPU limits are
not enforced. :func:`describe` says which, for the node log and the pod Events.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

from swarmkit_devcluster.kubeapi import JSON
from swarmkit_devcluster.process_node.env import parse_quantity

CGROUP_CONTROLLERS = ("memory", "cpu")
CGROUP_DIR_NAME = "swarmkit-process-node"


@dataclass(frozen=True)
class Limits:
    memory: int | None = None  # bytes
    cpu_millis: int | None = None


def container_limits(spec: JSON) -> Limits:
    limits = (spec.get("resources") or {}).get("limits") or {}
    memory = limits.get("memory")
    cpu = limits.get("cpu")
    return Limits(
        memory=int(parse_quantity(memory)) if memory is not None else None,
        cpu_millis=math.ceil(parse_quantity(cpu) * 1000) if cpu is not None else None,
    )


def _own_cgroup2() -> Path | None:
    mount = None
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] == "cgroup2":
                mount = fields[4]
                break
    if mount is None:
        return None
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as fh:
        for line in fh:
            if line.startswith("0::"):
                return Path(mount + line[3:].strip())
    return None


def cgroup_parent() -> Path | None:
    """A writable cgroup v2 directory delegating memory and cpu to its children, or
    None. Created as ``<our cgroup's parent>/swarmkit-process-node`` (a process may not both
    sit in a cgroup and have controller-enabled children: the no-internal-process rule)."""
    own = _own_cgroup2()
    if own is None:
        return None
    try:
        available = (own.parent / "cgroup.controllers").read_text().split()
    except OSError:
        return None
    if not all(c in available for c in CGROUP_CONTROLLERS):
        return None
    parent = own.parent / CGROUP_DIR_NAME
    try:
        parent.mkdir(exist_ok=True)
        (parent / "cgroup.subtree_control").write_text(
            " ".join(f"+{c}" for c in CGROUP_CONTROLLERS)
        )
    except OSError:
        return None
    return parent


def make_cgroup(parent: Path, name: str, limits: Limits) -> Path:
    cg = parent / name
    cg.mkdir(exist_ok=True)
    if limits.memory is not None:
        (cg / "memory.max").write_text(str(limits.memory))
        with contextlib.suppress(OSError):
            (cg / "memory.swap.max").write_text("0")
    if limits.cpu_millis is not None:
        (cg / "cpu.max").write_text(f"{max(1000, limits.cpu_millis * 100)} 100000")
    return cg


def remove_cgroup(cg: Path) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(cg)


def rlimits(limits: Limits) -> dict[str, int]:
    """The rlimit fallback (names of the ``resource`` module)."""
    out: dict[str, int] = {}
    if limits.memory is not None:
        out["RLIMIT_DATA"] = limits.memory
    return out


def describe(limits: Limits, cgroup: Path | None) -> str:
    if limits.memory is None and limits.cpu_millis is None:
        return "no limits"
    if cgroup is not None:
        return f"cgroup v2 {cgroup}"
    what = "memory as RLIMIT_DATA" if limits.memory is not None else ""
    if limits.cpu_millis is not None:
        what += ("; " if what else "") + "cpu not enforced (no writable cgroup v2)"
    return what
