"""The container launcher: puts one container's process into its own filesystem view, then
``exec``\\ s the container's command.

The node runs ``python -I -S sandbox.py SPEC.json`` with the container's environment; this
file therefore imports the standard library only and never the package. It

1. joins the container's cgroup (if the node made one), unshares a private mount namespace
   (plus a UTS namespace for the pod's hostname; unprivileged callers also get a user
   namespace mapping their uid to 0, as ``unshare -Urm`` does),
2. builds the root: for an *image* pod an overlay of the image's root filesystem (lower) and a
   per-container writable layer (upper); for a *host-command* pod a tmpfs whose top-level
   entries are the host's (recursive binds; a host directory in which a mount point has to be
   created is an overlay instead, so the host itself never changes),
3. mounts ``/proc``, ``/sys`` (read-only), a minimal ``/dev`` (tmpfs with null, zero, full,
   random, urandom, tty, ``shm``, ``pts``), then every bind mount of the spec at its real
   container path (volumes, the termination-log file, ``/etc/hosts``...), read-only where asked,
4. remounts the root read-only when ``readOnlyRoot``, ``pivot_root``\\ s into it, applies
   rlimits, ``no_new_privs`` and ``runAsUser``/``runAsGroup``, changes to the working directory
   and ``execvpe``\\ s the command with the environment it was given (the pod's, exactly: the
   variables Python's start-up adds, such as a coerced ``LC_CTYPE``, are dropped).

Any failure before ``exec`` is written to ``errorFile`` (opened close-on-exec, so a successful
exec leaves it empty) and to stderr (the container log); the exit code is then 128, which the
node reports as ``StartError`` like the kubelet.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import socket
import sys
from typing import Any

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_RELATIME = 0x200000
ST_RELATIME = 0x1000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
PR_SET_NO_NEW_PRIVS = 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}

DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
    "ptmx": "pts/ptmx",
}
#: Host top-level entries a host-command root never takes from the host.
SPECIAL_TOPS = ("proc", "sys", "dev")

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """The container could not be created (reported as StartError)."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source or fstype} on {target}",
    )


def bind(source: str, target: str, *, recursive: bool = True, readonly: bool = False) -> None:
    mount(source, target, None, MS_BIND | (MS_REC if recursive else 0))
    if readonly:
        remount_readonly(target)


def remount_readonly(target: str) -> None:
    """Make the mount at ``target`` read-only, keeping the flags a user namespace may not
    clear (nosuid, nodev, noexec, atime)."""
    kept = os.statvfs(target).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME)
    if os.statvfs(target).f_flag & ST_RELATIME:
        kept |= MS_RELATIME
    mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def pivot_root(new_root: str) -> None:
    """Make ``new_root`` the root and detach the old one (the ``pivot_root(".", ".")`` idiom)."""
    os.chdir(new_root)
    nr = SYS_PIVOT_ROOT.get(platform.machine())
    if nr is None:  # unknown syscall number: chroot is the portable fallback
        os.chroot(".")
    else:
        _check(_libc.syscall(ctypes.c_long(nr), b".", b"."), "pivot_root")
        _check(_libc.umount2(b".", ctypes.c_int(MNT_DETACH)), "umount old root")
    os.chdir("/")


def in_root(root: str, path: str) -> str:
    """``path`` (absolute, in the container) as a path under ``root`` on this side, following
    symlinks *inside* the root (an absolute link target is relative to ``root``)."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    resolved: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = os.path.join(root, *resolved, part)
        if os.path.islink(candidate):
            hops += 1
            if hops > 40:
                raise SetupError(f"too many symlinks resolving {path}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            continue
        resolved.append(part)
    return os.path.join(root, *resolved)


def make_point(path: str, is_file: bool) -> None:
    """Create a mount point (directory, or empty file) if it is not there."""
    if is_file:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.exists(path):
            with open(path, "a"):
                pass
    else:
        os.makedirs(path, exist_ok=True)


def host_tops_needing_overlay(targets: list[tuple[str, bool]]) -> set[str]:
    """The host top-level directories in which some mount point does not exist yet."""
    tops: set[str] = set()
    for target, _is_file in targets:
        real = os.path.realpath(target)
        if os.path.lexists(real):
            continue
        top = real.strip("/").split("/")[0]
        if top and top not in SPECIAL_TOPS and os.path.isdir("/" + top):
            tops.add(top)
    return tops


def host_root(spec: dict[str, Any], root: str) -> None:
    """A tmpfs root mirroring the host's top level (see the module docstring)."""
    mount("tmpfs", root, "tmpfs", MS_NOSUID, "mode=755,size=16m")
    targets = [(m["target"], bool(m.get("file"))) for m in spec.get("mounts", [])]
    targets.append((spec.get("cwd") or "/", False))
    overlays = host_tops_needing_overlay(targets)
    scratch = spec["upper"]
    for name in sorted(os.listdir("/")):
        if name in SPECIAL_TOPS:
            continue
        src = "/" + name
        dst = os.path.join(root, name)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        elif os.path.isdir(src):
            os.mkdir(dst)
            if name in overlays:
                upper = os.path.join(scratch, "upper", name)
                work = os.path.join(scratch, "work", name)
                os.makedirs(upper, exist_ok=True)
                os.makedirs(work, exist_ok=True)
                mount(
                    "overlay", dst, "overlay", 0, f"lowerdir={src},upperdir={upper},workdir={work}"
                )
            else:
                bind(src, dst)
        elif os.path.isfile(src):
            make_point(dst, True)
            bind(src, dst, recursive=False)


def image_root(spec: dict[str, Any], root: str) -> None:
    """The image's root filesystem under a per-container writable layer."""
    lower = spec["image"]
    upper = os.path.join(spec["upper"], "upper")
    work = os.path.join(spec["upper"], "work")
    os.makedirs(upper, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    try:
        mount("overlay", root, "overlay", 0, f"lowerdir={lower},upperdir={upper},workdir={work}")
    except SetupError as exc:  # no overlayfs here: the image itself, read-only
        print(f"sandbox: {exc}; using a read-only bind of the image", file=sys.stderr)
        bind(lower, root, readonly=True)


def minimal_dev(root: str) -> None:
    dev = os.path.join(root, "dev")
    os.makedirs(dev, exist_ok=True)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=64k")
    for name in DEV_NODES:
        if os.path.exists("/dev/" + name):
            make_point(os.path.join(dev, name), True)
            bind("/dev/" + name, os.path.join(dev, name), recursive=False)
    for name, target in DEV_LINKS.items():
        os.symlink(target, os.path.join(dev, name))
    os.mkdir(os.path.join(dev, "shm"))
    mount("shm", os.path.join(dev, "shm"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    os.mkdir(os.path.join(dev, "pts"))
    if os.path.isdir("/dev/pts"):
        bind("/dev/pts", os.path.join(dev, "pts"))


def enter_namespaces(spec: dict[str, Any]) -> None:
    flags = CLONE_NEWNS | (CLONE_NEWUTS if spec.get("hostname") else 0)
    uid, gid = os.getuid(), os.getgid()
    unprivileged = os.geteuid() != 0
    if unprivileged:
        flags |= CLONE_NEWUSER
    unshare(flags)
    if unprivileged:  # map ourselves to root inside, like `unshare -Urm`
        with open("/proc/self/setgroups", "w") as fh:
            fh.write("deny")
        with open("/proc/self/uid_map", "w") as fh:
            fh.write(f"0 {uid} 1")
        with open("/proc/self/gid_map", "w") as fh:
            fh.write(f"0 {gid} 1")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    if spec.get("hostname"):
        socket.sethostname(spec["hostname"])


def build_root(spec: dict[str, Any]) -> str:
    root: str = spec["root"]
    os.makedirs(root, exist_ok=True)
    if spec.get("image"):
        image_root(spec, root)
    else:
        host_root(spec, root)
    for name in ("proc", "sys"):
        os.makedirs(os.path.join(root, name), exist_ok=True)
    bind("/proc", os.path.join(root, "proc"))
    bind("/sys", os.path.join(root, "sys"), readonly=True)
    minimal_dev(root)
    for m in spec.get("mounts", []):
        target = in_root(root, m["target"])
        make_point(target, bool(m.get("file")))
        bind(
            m["source"],
            target,
            recursive=bool(m.get("recursive", True)),
            readonly=bool(m.get("readOnly")),
        )
    cwd = spec.get("cwd") or "/"
    make_point(in_root(root, cwd), False)
    if spec.get("readOnlyRoot"):
        remount_readonly(root)
    return root


def drop_privileges(spec: dict[str, Any]) -> None:
    for name, value in (spec.get("rlimits") or {}).items():
        limit = int(value)
        resource.setrlimit(getattr(resource, name), (limit, limit))
    if spec.get("noNewPrivs"):
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    user = spec.get("user")
    if user is not None:
        uid, gid, groups = int(user[0]), int(user[1]), [int(g) for g in user[2]]
        try:
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)
        except OSError as exc:
            raise SetupError(f"runAsUser {uid}/runAsGroup {gid}: {exc}") from exc


def main(argv: list[str]) -> int:
    with open(argv[1]) as fh:
        spec = json.load(fh)
    err = open(spec["errorFile"], "w")  # noqa: SIM115 - close-on-exec: closes itself on exec
    try:
        if spec.get("cgroup"):
            with open(os.path.join(spec["cgroup"], "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))
        enter_namespaces(spec)
        root = build_root(spec)
        pivot_root(root)
        drop_privileges(spec)
        os.chdir(spec.get("cwd") or "/")
        argv_c = list(spec["argv"])
        if not argv_c:
            raise SetupError("no command specified")
        env = dict(os.environ)
        if spec.get("envKeys") is not None:  # what Python itself added (LC_CTYPE) goes
            env = {k: v for k, v in env.items() if k in set(spec["envKeys"])}
        try:
            os.execvpe(argv_c[0], argv_c, env)
        except OSError as exc:
            raise SetupError(f'exec: "{argv_c[0]}": {exc.strerror}') from exc
    except (SetupError, OSError) as exc:
        message = f"cannot start the container: {exc}"
        err.write(message)
        err.close()
        print(f"process node: {message}", file=sys.stderr)
        return 128
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
