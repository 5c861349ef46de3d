"""The tools ``make images`` drives: buildah (vfs storage in the cache, chroot isolation, no
daemon) and debootstrap, both from Debian's packages (installed with apt-get when missing),
and a logged subprocess helper."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from swarmkit_devcluster.kubeapi import JSON

APT_PACKAGES = ("buildah", "debootstrap")


class ImageBuildError(RuntimeError):
    """``make images`` cannot go on; the message says why and what to do."""


def log(msg: str) -> None:
    print(f"images: {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], *, capture: bool = False, cwd: Path | None = None) -> str:
    """Run ``cmd``; its output goes to our stderr unless captured. A failure raises with the
    command and (captured) output tail."""
    try:
        out = subprocess.run(
            cmd,
            cwd=cwd,
            check=False,
            text=True,
            stdout=subprocess.PIPE if capture else sys.stderr,
            stderr=subprocess.PIPE if capture else sys.stderr,
        )
    except OSError as exc:
        raise ImageBuildError(f"{cmd[0]}: {exc}") from exc
    if out.returncode != 0:
        tail = (out.stderr or "")[-2000:] if capture else "(output above)"
        raise ImageBuildError(f"`{' '.join(cmd[:4])} ...` exited {out.returncode}: {tail}")
    return out.stdout if capture else ""


def ensure_tools() -> None:
    """buildah and debootstrap on PATH; as root, ``apt-get install`` them when missing."""
    missing = [p for p, exe in (("buildah", "buildah"), ("debootstrap", "debootstrap"))
               if shutil.which(exe) is None]  # fmt: skip
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ImageBuildError(
            f"{', '.join(missing)} missing: install them (Debian/Ubuntu: "
            f"sudo apt-get install -y {' '.join(APT_PACKAGES)}) and run `make images` again"
        )
    log(f"installing {' '.join(missing)} (apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        if subprocess.run(cmd, env=env, check=False, stdout=subprocess.DEVNULL).returncode:
            raise ImageBuildError(f"`{' '.join(cmd)}` failed; install {' '.join(missing)}")


class Buildah:
    """buildah with its own storage under the image cache (vfs: no overlay-on-overlay or fuse
    needed) and chroot isolation (no runc/crun namespaces, no daemon)."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.prefix = [
            "buildah",
            "--root", str(state / "storage"),
            "--runroot", str(state / "run"),
            "--storage-driver", "vfs",
        ]  # fmt: skip

    def __call__(self, *args: str, capture: bool = True, cwd: Path | None = None) -> str:
        return run([*self.prefix, *args], capture=capture, cwd=cwd).strip()

    def version(self) -> str:
        return self("--version")

    def image_id(self, reference: str) -> str | None:
        try:
            return self("inspect", "--type", "image", "--format", "{{.FromImageID}}", reference)
        except ImageBuildError:
            return None

    def image_json(self, reference: str) -> JSON:
        data: JSON = json.loads(self("inspect", "--type", "image", reference))
        return data
