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
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from swarmkit_devcluster.imagebuild.build import INDEX_FILE, RECORD_FILE, checkout_build
from swarmkit_devcluster.imagebuild.inuse import Leases
from swarmkit_devcluster.imagebuild.pins import IMAGES, ImageSpec
from swarmkit_devcluster.imagebuild.tools import ImageBuildError
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
    changes, so images built while the node runs are picked up.

    Given the checkout it runs from (``repo``), a store ``make images`` writes (it has
    ``builds.json``) resolves the repository's own images to the build of *that checkout's*
    inputs (``rootfs/<image>-<key>``), never to the most recent build, which may be another
    checkout's on this machine (see ``imagebuild/build.py``)."""

    def __init__(self, directory: Path | None, repo: Path | None = None) -> None:
        self.directory = directory
        self.repo = repo
        self._stamp: tuple[int, int] | None = None
        self._images: dict[str, LocalImage] = {}
        self._lock = threading.Lock()
        self._keyed: dict[str, tuple[float, LocalImage | str | None]] = {}
        # Every root filesystem handed to a pod stays leased while this node runs, so another
        # checkout's `make images` does not prune it under the pod (imagebuild/inuse.py).
        self._leases = Leases()

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

    def lookup(self, image: str) -> LocalImage | str | None:
        """The image's local root filesystem; else, for a repository image the store keeps
        only other checkouts' builds of, why not (a message naming ``make images``); else
        None (the host-command table may know it)."""
        if image in project_images() and self._holds_checkouts():
            checkout = self._checkout_image(image)
            if isinstance(checkout, LocalImage) and not self._leases.hold(checkout.rootfs):
                return None
            return checkout
        with self._lock:
            self._reload()
            found = self._images.get(image)
        if found is None:
            return None
        if self._leases.hold(found.rootfs):
            return found
        if image in project_images():  # never a silent fall back to host commands
            return f"image {image!r}: its root filesystem {found.rootfs} is gone; run `make images`"
        return None

    def _holds_checkouts(self) -> bool:
        """A store ``make images`` writes (``builds.json``), read from a known checkout."""
        if self.directory is None or self.repo is None:
            return False
        return (self.directory / RECORD_FILE).is_file()

    def resolve(self, image: str) -> LocalImage | None:
        found = self.lookup(image)
        return found if isinstance(found, LocalImage) else None

    def _checkout_image(self, image: str) -> LocalImage | str | None:
        # A pod start asks several times; hashing the inputs takes 3-21 ms here, a source edit
        # followed by `make images` takes far longer than this cache lives.
        now = time.monotonic()
        with self._lock:
            cached = self._keyed.get(image)
            if cached is not None and now - cached[0] < KEY_CACHE_SECONDS:
                return cached[1]
        found = self._checkout_build(image)
        with self._lock:
            self._keyed[image] = (now, found)
        return found

    def _checkout_build(self, image: str) -> LocalImage | str | None:
        assert self.directory is not None and self.repo is not None
        spec = project_images()[image]
        try:
            key, entry, kept = checkout_build(self.repo, self.directory, spec)
        except (OSError, ImageBuildError) as exc:  # e.g. an input missing from the checkout
            return f"image {image!r}: cannot compute the build key of {self.repo}: {exc}"
        if entry is not None:
            return local_image(image, entry, self.directory)
        if not kept:
            return None  # never built on this machine: the host-command table applies
        return (
            f"image {image!r}: {self.directory} has no root filesystem built from this "
            f"checkout's sources ({self.repo}, key {key}); it keeps {kept} build(s) of other "
            f"sources (another checkout's, or before an edit); run `make images` in {self.repo}"
        )


#: How long a repository image's resolution (its inputs' key) is reused.
KEY_CACHE_SECONDS = 2.0


def project_images() -> dict[str, ImageSpec]:
    """The repository's own images (``make images`` builds them), by reference."""
    return {spec.reference: spec for spec in IMAGES}


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
