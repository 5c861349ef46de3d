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

from swarmkit_devcluster.imagebuild import inuse, pins
from swarmkit_devcluster.imagebuild.bases import make_bases
from swarmkit_devcluster.imagebuild.tools import Buildah, ImageBuildError, ensure_tools, log, run
from swarmkit_devcluster.kubeapi import JSON
from swarmkit_devcluster.locks import exclusive
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
    """Build (or reuse) each image and (re)write its index entries; returns the build records."""
    if os.geteuid() != 0:
        raise ImageBuildError(
            "make images needs root (debootstrap, and buildah's vfs storage mounts); "
            "run it as root, e.g. `sudo make images`"
        )
    # Checkouts share the store: two builds at once would each rewrite index.json from what
    # they read, and prune the root filesystem the other just recorded.
    with exclusive(store_dir() / ".build.lock"):
        return build_locked(repo, names, force)


def build_locked(repo: Path, names: list[str] | None, force: bool) -> JSON:
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
            entry = key_entries(index, records, spec).get(key) or {}
            record_build(index, records, spec, {**entry, "config": old["config"], "key": key,
                                                "rootfs": f"rootfs/{rootfs.name}"})  # fmt: skip
            continue
        log(f"building {spec.reference} ({spec.dockerfile})")
        t1 = time.monotonic()
        build_one(buildah, repo, spec)
        # Another checkout with the same inputs may be running pods on this key's root
        # filesystem: an existing one is identical, so it stays (unless forced).
        if force or not (rootfs / "usr").is_dir():
            export_rootfs(buildah, spec.reference, rootfs)
        seconds = round(time.monotonic() - t1, 1)
        config = image_config(buildah, spec.reference)
        built_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        record_build(index, records, spec, {
            "rootfs": f"rootfs/{rootfs.name}", "config": config, "key": key,
            "builtAt": built_at, "baseIds": base_ids, "builder": tool,
        })  # fmt: skip
        records[spec.name] = {
            "reference": spec.reference,
            "key": key,
            "imageId": buildah.image_id(spec.reference),
            "config": config,
            "rootfsBytes": tree_size(rootfs),
            "buildSeconds": seconds,
            "baseSeconds": base_seconds,
            "builtAt": built_at,
            "builder": tool,
            "baseIds": base_ids,
        }
        write_json(store / RECORD_FILE, records)
        write_json(store / INDEX_FILE, index)
        prune_builds(store, index, spec)
        write_json(store / INDEX_FILE, index)
        mib = records[spec.name]["rootfsBytes"] / 2**20
        log(f"{spec.reference}: built in {seconds:.0f}s, root filesystem {mib:.0f} MiB")
    write_json(store / INDEX_FILE, index)
    try:  # the images a rebuild untagged: their layers are full copies with vfs
        buildah("rmi", "--prune")
    except ImageBuildError as exc:
        log(f"could not prune untagged images: {exc}")
    return records


# -- several checkouts, one store ------------------------------------------------------------
#
# ``index.json`` holds, per image reference, the builds of the last :data:`KEEP` input keys
# (``builds[reference][key]``: root filesystem, config, build time, the base ids and builder
# the key was computed with) and, under ``images[reference]``, the most recent build (what a
# reader without a checkout takes, e.g. the real node's archive export). Each checkout (a
# worktree, a CI clone) resolves a reference to the build of *its own* inputs' key, so one
# checkout's ``make images`` neither deletes the root filesystem another's pods run on nor
# points the other's next pods at its code: a build beyond the newest KEEP is deleted only when
# no node runs pods from it (:mod:`.inuse`).

#: Root filesystems kept per image (one per input key, newest by build time). Disk cost per
#: kept key: operator ~224 MiB, runtime ~460 MiB.
KEEP = 3


def record_build(index: JSON, records: JSON, spec: pins.ImageSpec, entry: JSON) -> None:
    """Make ``entry`` the reference's most recent build and keep it among its per-key builds
    (``records``: ``builds.json`` before this build; an index from before per-key entries has
    one build, which becomes the first kept one)."""
    builds = key_entries(index, records, spec)
    builds[entry["key"]] = entry
    index.setdefault("builds", {})[spec.reference] = builds
    index.setdefault("images", {})[spec.reference] = entry


def prune_builds(store: Path, index: JSON, spec: pins.ImageSpec) -> list[str]:
    """Keep the :data:`KEEP` newest builds of ``spec`` (by ``builtAt``) and every older one a
    node still runs pods from (:mod:`.inuse`); delete the others' root filesystems and
    entries, and any ``rootfs/<image>-*`` no entry names (left by a build before per-key
    entries). Returns the deleted directory names."""
    builds = index.setdefault("builds", {}).setdefault(spec.reference, {})
    newest = sorted(builds, key=lambda k: str(builds[k].get("builtAt", "")), reverse=True)
    keep = set(newest[:KEEP])
    deleted = []
    for stale in sorted((store / "rootfs").glob(f"{spec.name}-*")):
        if stale.name.endswith((".tmp", inuse.SUFFIX)):
            continue
        named = [k for k in builds if Path(str(builds[k].get("rootfs", ""))).name == stale.name]
        if keep.intersection(named):
            continue
        with inuse.unused(stale) as free:
            if not free:
                log(f"{stale.name}: kept, a node runs pods from it")
                continue
            shutil.rmtree(stale, ignore_errors=True)
            inuse.lock_path(stale).unlink(missing_ok=True)
        for key in named:
            del builds[key]
        deleted.append(stale.name)
    for key in [k for k in builds if k not in keep]:
        if not (store / str(builds[key].get("rootfs", ""))).is_dir():
            del builds[key]  # its root filesystem went before this rule
    return deleted


def key_entries(index: JSON, records: JSON, spec: pins.ImageSpec) -> dict[str, JSON]:
    """The kept builds of ``spec`` by key (an index written before per-key entries has only
    the most recent one, under ``images``; its base ids and builder are in ``builds.json``)."""
    entries: dict[str, JSON] = dict((index.get("builds") or {}).get(spec.reference) or {})
    latest = (index.get("images") or {}).get(spec.reference) or {}
    if latest.get("key") and latest["key"] not in entries:
        rec = records.get(spec.name) or {}
        entries[latest["key"]] = {
            **latest, "baseIds": rec.get("baseIds") or {}, "builder": rec.get("builder", ""),
            "builtAt": rec.get("builtAt", ""),
        }  # fmt: skip
    return entries


def checkout_key(repo: Path, spec: pins.ImageSpec, entries: dict[str, JSON], record: JSON) -> str:
    """The key of ``repo``'s inputs for ``spec``. It also hashes the base ids and the builder
    version, which only a build knows: tried with those of the latest build record, then of
    each kept build (they differ only when the bases were rebuilt); the first that names a
    kept build wins, else the latest record's."""
    tried: set[str] = set()
    first = ""
    for e in (record, *entries.values()):
        base_ids, builder = e.get("baseIds") or {}, str(e.get("builder", ""))
        combo = json.dumps([base_ids, builder], sort_keys=True)
        if combo in tried:
            continue
        tried.add(combo)
        key = input_key(repo, spec, base_ids, builder)
        if key in entries:
            return key
        first = first or key
    return first


def checkout_build(repo: Path, store: Path, spec: pins.ImageSpec) -> tuple[str, JSON | None, int]:
    """(``repo``'s key for ``spec``, its kept build if that root filesystem exists else None,
    how many builds of ``spec`` the store keeps)."""
    index, records = read_json(store / INDEX_FILE), read_json(store / RECORD_FILE)
    entries = key_entries(index, records, spec)
    key = checkout_key(repo, spec, entries, records.get(spec.name) or {})
    entry = entries.get(key)
    if entry and (store / str(entry.get("rootfs")) / "usr").is_dir():
        return key, entry, len(entries)
    return key, None, len(entries)


def image_status(repo: Path) -> dict[str, str]:
    """Per image reference: ``ok`` (the store keeps a build of this checkout's inputs),
    ``stale`` (it keeps only builds of other inputs: sources changed, or another checkout's)
    or ``missing``, without running buildah (fast: what tests and ``make test`` consult)."""
    out = {}
    for spec in pins.IMAGES:
        _, entry, kept = checkout_build(repo, store_dir(), spec)
        out[spec.reference] = build_status(entry, kept)
    return out


def build_status(entry: JSON | None, kept: int) -> str:
    """``ok`` (this checkout's build is kept), ``stale`` (only other builds) or ``missing``."""
    return "ok" if entry else "stale" if kept else "missing"


def current_images_store(repo: Path, dest: Path) -> dict[str, str]:
    """Write an image store at ``dest`` listing only the images built from this checkout's
    inputs (their root filesystems stay where ``make images`` put them): a test session's
    process node uses it, so a stale image (sources changed since the build, or another
    checkout's build) never runs in a test; those pods use the host-command fallback instead.
    Returns :func:`image_status`."""
    store = store_dir()
    current, status = {}, {}
    for spec in pins.IMAGES:
        _, entry, kept = checkout_build(repo, store, spec)
        status[spec.reference] = build_status(entry, kept)
        if entry:
            rootfs = str((store / str(entry["rootfs"])).resolve())
            current[spec.reference] = {"rootfs": rootfs, "config": entry.get("config") or {},
                                       "key": entry["key"]}  # fmt: skip
    dest.mkdir(parents=True, exist_ok=True)
    write_json(dest / INDEX_FILE, {"images": current})
    return status
