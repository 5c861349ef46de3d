"""Local processes and ports for the control plane: a started process's identity
(:class:`Proc`: pid plus start time, so a reused pid is not mistaken for it), finding
processes by the cluster marker, free loopback ports and log tails."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from swarmkit_devcluster.process_node import MARKER_ENV


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def proc_start_time(pid: int) -> int | None:
    """Process start time (clock ticks since boot), to tell a live pid from a reused one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def processes_with_marker(marker: str) -> list[int]:
    needle = f"{MARKER_ENV}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            found.append(int(entry))
    return found


def tail(path: Path, lines: int = 40) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return "(no log)"
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


@dataclass
class Proc:
    name: str
    pid: int
    start_time: int | None
    log: str
    cmd: list[str]

    def alive(self) -> bool:
        st = proc_start_time(self.pid)
        return st is not None and (self.start_time is None or st == self.start_time)
