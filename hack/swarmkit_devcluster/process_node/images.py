"""Images: local root filesystems (:class:`ImageStore`, filled by ``make images``) and, for an
image without one, the host-command table (:class:`ImageMap`, matched against the image
repository and then the full reference); the Kubernetes ``command``/``args`` rules for both
(:func:`build_argv`, :func:`image_argv`). See the package docstring for the built-in table."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import yaml

from swarmkit_devcluster.kubeapi import JSON
from swarmkit_devcluster.paths import cache_root

PYTHON_ALIASES = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$")


@dataclass(frozen=True)
class ImageRule:
    match: str
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


BUILTIN_IMAGE_RULES: tuple[ImageRule, ...] = (
    ImageRule(
        "*swarmkit-runtime",
        entrypoint=("{python}", "-m", "swarmkit_runner"),
        env=(("PYTHONUNBUFFERED", "1"),),
    ),
    ImageRule(
        "*swarmkit-operator",
        entrypoint=("{python}", "-m", "swarmkit_operator"),
        env=(("PYTHONUNBUFFERED", "1"),),
    ),
    ImageRule("python", cmd=("{python}",), env=(("PYTHONUNBUFFERED", "1"),)),
    ImageRule("*/python", cmd=("{python}",), env=(("PYTHONUNBUFFERED", "1"),)),
)


def image_repository(image: str) -> str:
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        ref = ref[: len(ref) - len(last)] + last.split(":", 1)[0]
    return ref


class ImageMap:
    def __init__(self, rules: tuple[ImageRule, ...], source: str) -> None:
        self.rules = rules
        self.source = source

    @classmethod
    def load(cls, path: str | None) -> ImageMap:
        if not path:
            return cls(BUILTIN_IMAGE_RULES, "the built-in image table")
        data = yaml.safe_load(Path(path).read_text()) or {}
        rules = []
        for r in data.get("images", []):
            rules.append(
                ImageRule(
                    match=str(r["match"]),
                    entrypoint=tuple(str(x) for x in r.get("entrypoint", r.get("command", []))),
                    cmd=tuple(str(x) for x in r.get("cmd", r.get("args", []))),
                    env=tuple((str(k), str(v)) for k, v in (r.get("env") or {}).items()),
                )
            )
        if data.get("includeBuiltins", True):
            rules += BUILTIN_IMAGE_RULES
        return cls(tuple(rules), f"image table {path}")

    def resolve(self, image: str) -> ImageRule | None:
        repo = image_repository(image)
        for rule in self.rules:
            if fnmatch.fnmatchcase(repo, rule.match) or fnmatch.fnmatchcase(image, rule.match):
                return rule
        return None


def subst_python(s: str) -> str:
    """Replace ``{python}`` in an image-table entry with the node's interpreter."""
    return s.replace("{python}", sys.executable)


def build_argv(rule: ImageRule, container: JSON) -> list[str]:
    command = container.get("command") or []
    args = container.get("args") or []
    if command:
        argv = list(command) + list(args)
    elif args:
        argv = [subst_python(x) for x in rule.entrypoint] + list(args)
    else:
        argv = [subst_python(x) for x in rule.entrypoint + rule.cmd]
    if argv and PYTHON_ALIASES.match(argv[0]):
        argv[0] = sys.executable
    return argv


# -- local root filesystems ------------------------------------------------------------------

INDEX_FILE = "index.json"


@dataclass(frozen=True)
class LocalImage:
    """An image whose root filesystem is on this machine, with the parts of its OCI config the
    node honours."""

    reference: str
    rootfs: Path
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    working_dir: str = ""
    user: str = ""  # "uid[:gid]" (numeric), the image's USER


def local_image(reference: str, entry: JSON, base: Path) -> LocalImage:
    """One ``index.json`` entry (``rootfs`` relative to the store or absolute, ``config`` in
    the OCI image-config spelling: Entrypoint, Cmd, Env, WorkingDir, User)."""
    cfg = entry.get("config") or {}
    env = []
    for item in cfg.get("Env") or []:
        k, _, v = str(item).partition("=")
        env.append((k, v))
    return LocalImage(
        reference=reference,
        rootfs=(base / str(entry["rootfs"])).resolve(),
        entrypoint=tuple(str(x) for x in cfg.get("Entrypoint") or ()),
        cmd=tuple(str(x) for x in cfg.get("Cmd") or ()),
        env=tuple(env),
        working_dir=str(cfg.get("WorkingDir") or ""),
        user=str(cfg.get("User") or ""),
    )


class ImageStore:
    """The images with a local root filesystem: ``<dir>/index.json`` maps image references
    (exactly as a pod spells them) to a root filesystem and its config. Re-read when the file
    changes, so images built while the node runs are picked up."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._stamp: tuple[int, int] | None = None
        self._images: dict[str, LocalImage] = {}
        self._lock = threading.Lock()

    def _reload(self) -> None:
        if self.directory is None:
            return
        index = self.directory / INDEX_FILE
        try:
            st = index.stat()
        except OSError:
            self._images, self._stamp = {}, None
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        try:
            data = json.loads(index.read_text())
            images = {
                ref: local_image(ref, entry, self.directory)
                for ref, entry in (data.get("images") or {}).items()
            }
        except (OSError, ValueError, KeyError, TypeError):
            return  # being rewritten: keep what we had
        self._images, self._stamp = images, stamp

    def resolve(self, image: str) -> LocalImage | None:
        with self._lock:
            self._reload()
            found = self._images.get(image)
        if found is not None and (found.rootfs / "usr").is_dir():
            return found
        return None


def default_store_dir() -> Path:
    """``$SWARMKIT_NODE_IMAGE_STORE``, else ``<cache>/images`` (what ``make images`` fills)."""
    env = os.environ.get("SWARMKIT_NODE_IMAGE_STORE")
    if env:
        return Path(env).expanduser()
    return cache_root() / "images"


def image_argv(image: LocalImage, container: JSON) -> list[str]:
    """Kubernetes semantics over the image config: ``command`` replaces the entrypoint (and
    the cmd), ``args`` replace the cmd."""
    command = container.get("command") or []
    args = container.get("args") or []
    if command:
        return list(command) + list(args)
    if args:
        return list(image.entrypoint) + list(args)
    return list(image.entrypoint + image.cmd)
