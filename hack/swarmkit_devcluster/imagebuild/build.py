"""Build the repository's images with buildah, export their root filesystems into the process
node's image store and write its ``index.json`` (see ``process_node/images.py``).

An image is rebuilt only when its inputs changed: the cache key hashes the Dockerfile, the
build-context paths its COPY lines read (minus what ``.dockerignore`` drops), the base image
ids, the buildah version and the recipe version. ``README.md`` is copied by both Dockerfiles
only as the package's long description, so it is left out of the key (editing the README
does not rebuild the images)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from swarmkit_devcluster.imagebuild import pins
from swarmkit_devcluster.imagebuild.bases import make_bases
from swarmkit_devcluster.imagebuild.tools import Buildah, ImageBuildError, ensure_tools, log, run
from swarmkit_devcluster.kubeapi import JSON
from swarmkit_devcluster.paths import cache_root

IGNORED_DIRS = frozenset({"__pycache__", "build", "dist", ".mypy_cache", ".pytest_cache"})
RECORD_FILE = "builds.json"
INDEX_FILE = "index.json"
CA_DIR = "/etc/ssl/certs"


def store_dir() -> Path:
    """``<cache>/images``: the image store the process node reads by default (a node given
    ``$SWARMKIT_NODE_IMAGE_STORE`` reads that instead; the build always writes here)."""
    return cache_root() / "images"


def context_files(repo: Path, spec: pins.ImageSpec) -> list[Path]:
    files: list[Path] = []
    for rel in spec.context_paths:
        p = repo / rel
        if p.is_file():
            files.append(p)
            continue
        if not p.is_dir():
            raise ImageBuildError(f"{rel}: missing (an input of the {spec.name} image)")
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames[:] = sorted(
                d for d in dirnames if d not in IGNORED_DIRS and not d.endswith(".egg-info")
            )
            files += [Path(dirpath) / f for f in sorted(filenames) if not f.endswith(".pyc")]
    return files


def input_key(repo: Path, spec: pins.ImageSpec, base_ids: dict[str, str], tool: str) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([pins.RECIPE_VERSION, spec.reference, spec.build_args, tool]).encode())
    for _, ref in spec.build_args:
        h.update(base_ids.get(ref, ref).encode())
    for f in context_files(repo, spec):
        h.update(str(f.relative_to(repo)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def read_json(path: Path) -> JSON:
    try:
        data: JSON = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def write_json(path: Path, data: JSON) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def tree_size(root: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(root):
        for f in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            total += st.st_size
    return total


def export_rootfs(buildah: Buildah, reference: str, dest: Path) -> None:
    """Copy the image's merged root filesystem to ``dest`` (owners, modes, links kept)."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    ctr = buildah("from", "--pull-never", reference)
    try:
        mnt = buildah("mount", ctr)
        run(["cp", "-a", f"{mnt}/.", f"{tmp}/"])
    finally:
        buildah("rm", ctr)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def build_one(buildah: Buildah, repo: Path, spec: pins.ImageSpec) -> None:
    args: list[str] = []
    for name, value in spec.build_args:
        args += ["--build-arg", f"{name}={value}"]
    # pip and apt in RUN steps reach PyPI/Debian through this machine's network; PyPI may be
    # behind a TLS-intercepting proxy whose CA only the host trusts: the host's CA directory
    # is mounted (read-only, RUN steps only: it is not part of any layer).
    if Path(CA_DIR).is_dir():
        args += ["--volume", f"{CA_DIR}:{CA_DIR}:ro"]
    buildah(
        "bud", "--isolation", "chroot", "--pull-never", "--layers=false",
        *args, "-f", spec.dockerfile, "-t", spec.reference, ".",
        capture=False, cwd=repo,
    )  # fmt: skip


def image_config(buildah: Buildah, reference: str) -> JSON:
    cfg = buildah.image_json(reference).get("OCIv1", {}).get("config", {}) or {}
    keep = ("Entrypoint", "Cmd", "Env", "WorkingDir", "User")
    return {k: cfg[k] for k in keep if cfg.get(k)}


def build_images(repo: Path, names: list[str] | None = None, force: bool = False) -> JSON:
    """Build (or reuse) each image and (re)write its index entry; returns the build records."""
    if os.geteuid() != 0:
        raise ImageBuildError(
            "make images needs root (debootstrap, and buildah's vfs storage mounts); "
            "run it as root, e.g. `sudo make images`"
        )
    ensure_tools()
    store = store_dir()
    store.mkdir(parents=True, exist_ok=True)
    buildah = Buildah(store / "buildah")
    tool = buildah.version()
    t0 = time.monotonic()
    base_ids = make_bases(buildah, store / "base")
    base_seconds = round(time.monotonic() - t0, 1)
    records = read_json(store / RECORD_FILE)
    index = read_json(store / INDEX_FILE)
    images = index.setdefault("images", {})
    for spec in pins.IMAGES:
        if names and spec.name not in names:
            continue
        key = input_key(repo, spec, base_ids, tool)
        rootfs = store / "rootfs" / f"{spec.name}-{key}"
        old = records.get(spec.name) or {}
        fresh = (
            old.get("key") == key and (rootfs / "usr").is_dir() and buildah.image_id(spec.reference)
        )
        if fresh and not force:
            log(f"{spec.reference}: up to date ({key})")
            images[spec.reference] = {"rootfs": f"rootfs/{rootfs.name}", "config": old["config"],
                                      "key": key}  # fmt: skip
            continue
        log(f"building {spec.reference} ({spec.dockerfile})")
        t1 = time.monotonic()
        build_one(buildah, repo, spec)
        export_rootfs(buildah, spec.reference, rootfs)
        seconds = round(time.monotonic() - t1, 1)
        config = image_config(buildah, spec.reference)
        records[spec.name] = {
            "reference": spec.reference,
            "key": key,
            "imageId": buildah.image_id(spec.reference),
            "config": config,
            "rootfsBytes": tree_size(rootfs),
            "buildSeconds": seconds,
            "baseSeconds": base_seconds,
            "builtAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "builder": tool,
            "baseIds": base_ids,
        }
        images[spec.reference] = {"rootfs": f"rootfs/{rootfs.name}", "config": config, "key": key}
        write_json(store / RECORD_FILE, records)
        write_json(store / INDEX_FILE, index)
        for stale in (store / "rootfs").glob(f"{spec.name}-*"):
            if stale != rootfs and not stale.name.endswith(".tmp"):
                shutil.rmtree(stale, ignore_errors=True)
        mib = records[spec.name]["rootfsBytes"] / 2**20
        log(f"{spec.reference}: built in {seconds:.0f}s, root filesystem {mib:.0f} MiB")
    write_json(store / INDEX_FILE, index)
    try:  # the images a rebuild untagged: their layers are full copies with vfs
        buildah("rmi", "--prune")
    except ImageBuildError as exc:
        log(f"could not prune untagged images: {exc}")
    return records


def image_status(repo: Path) -> dict[str, str]:
    """Per image reference: ``ok``, ``stale`` (inputs changed since the build) or ``missing``,
    without running buildah (fast: what tests and ``make test`` consult)."""
    store = store_dir()
    index = read_json(store / INDEX_FILE).get("images") or {}
    records = read_json(store / RECORD_FILE)
    out = {}
    for spec in pins.IMAGES:
        entry, rec = index.get(spec.reference), records.get(spec.name) or {}
        if not entry or not (store / str(entry.get("rootfs")) / "usr").is_dir():
            out[spec.reference] = "missing"
            continue
        base_ids = rec.get("baseIds") or {}
        key = input_key(repo, spec, base_ids, str(rec.get("builder", "")))
        out[spec.reference] = "ok" if key == entry.get("key") else "stale"
    return out


def current_images_store(repo: Path, dest: Path) -> dict[str, str]:
    """Write an image store at ``dest`` listing only the images whose build is current (their
    root filesystems stay where ``make images`` put them): a test session's process node uses
    it, so a stale image (sources changed since the build) never runs old code in a test; those
    pods use the host-command fallback instead. Returns :func:`image_status`."""
    status = image_status(repo)
    store = store_dir()
    index = read_json(store / INDEX_FILE).get("images") or {}
    current = {
        ref: {**entry, "rootfs": str((store / str(entry["rootfs"])).resolve())}
        for ref, entry in index.items()
        if status.get(ref) == "ok"
    }
    dest.mkdir(parents=True, exist_ok=True)
    write_json(dest / INDEX_FILE, {"images": current})
    return status
