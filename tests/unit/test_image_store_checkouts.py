"""Several checkouts, one image store (issue 48): each checkout's process node and test
sessions use the image built from *its own* inputs, and one checkout's build neither deletes
the root filesystem another's pods run on nor points the other at its code.

Over a temporary directory laid out like ``make images``' store (``index.json``,
``builds.json``, ``rootfs/<image>-<key>/usr``), written with the bookkeeping the build itself
uses (:func:`record_build`, :func:`prune_builds`); buildah is not run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from swarmkit_devcluster.imagebuild.build import (
    INDEX_FILE,
    KEEP,
    RECORD_FILE,
    current_images_store,
    image_status,
    input_key,
    prune_builds,
    read_json,
    record_build,
    write_json,
)
from swarmkit_devcluster.imagebuild.pins import IMAGES, ImageSpec
from swarmkit_devcluster.process_node.images import ImageMap, ImageRule, ImageStore
from swarmkit_devcluster.process_node.pod import NodeContext, PodWorker

OPERATOR = next(s for s in IMAGES if s.name == "operator")
RUNTIME = next(s for s in IMAGES if s.name == "runtime")
BASE_IDS = {"localhost/swarmkit-base/python:3.11-slim-bookworm": "sha256:base"}
BUILDER = "buildah version 1.99"


def checkout(root: Path, marker: str) -> Path:
    """A checkout holding every image input; ``marker`` is its operator/runtime source."""
    root.mkdir(parents=True)
    for spec in IMAGES:
        for rel in spec.context_paths:
            p = root / rel
            if "." in p.name:
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(f"{rel}\n")
            else:
                p.mkdir(parents=True, exist_ok=True)
                (p / "code.py").write_text(f"VERSION = {marker!r}\n")
    return root


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SWARMKIT_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "cache" / "images"
    (path / "rootfs").mkdir(parents=True)
    return path


def build(store: Path, repo: Path, spec: ImageSpec, built_at: str) -> str:
    """What ``build_images`` does to the store once buildah built ``spec`` from ``repo``."""
    key = input_key(repo, spec, BASE_IDS, BUILDER)
    rootfs = store / "rootfs" / f"{spec.name}-{key}"
    (rootfs / "usr").mkdir(parents=True, exist_ok=True)
    index, records = read_json(store / INDEX_FILE), read_json(store / RECORD_FILE)
    entry = {"rootfs": f"rootfs/{rootfs.name}", "config": {"Cmd": [key]}, "key": key,
             "builtAt": built_at, "baseIds": BASE_IDS, "builder": BUILDER}  # fmt: skip
    record_build(index, records, spec, entry)
    records[spec.name] = {"reference": spec.reference, "key": key, "config": entry["config"],
                          "builtAt": built_at, "baseIds": BASE_IDS, "builder": BUILDER}  # fmt: skip
    write_json(store / RECORD_FILE, records)
    prune_builds(store, index, spec)
    write_json(store / INDEX_FILE, index)
    return key


def test_each_checkout_resolves_its_own_build_after_another_rebuilt(
    tmp_path: Path, store: Path
) -> None:
    a, b = checkout(tmp_path / "a", "a"), checkout(tmp_path / "b", "b")
    key_a = build(store, a, OPERATOR, "2026-12-05T20:00:00Z")
    key_b = build(store, b, OPERATOR, "2026-12-05T20:05:00Z")  # b's `make images`, later
    assert key_a != key_b
    # a's root filesystem survives b's build, and a's node still resolves to it.
    assert (store / "rootfs" / f"operator-{key_a}" / "usr").is_dir()
    found_a = ImageStore(store, a).resolve(OPERATOR.reference)
    found_b = ImageStore(store, b).resolve(OPERATOR.reference)
    assert found_a is not None and found_a.rootfs.name == f"operator-{key_a}"
    assert found_a.cmd == (key_a,)
    assert found_b is not None and found_b.rootfs.name == f"operator-{key_b}"
    assert image_status(a)[OPERATOR.reference] == "ok"
    assert image_status(b)[OPERATOR.reference] == "ok"


def test_test_sessions_store_lists_this_checkouts_build(tmp_path: Path, store: Path) -> None:
    a, b = checkout(tmp_path / "a", "a"), checkout(tmp_path / "b", "b")
    key_a = build(store, a, RUNTIME, "2026-12-05T20:00:00Z")
    build(store, b, RUNTIME, "2026-12-05T20:05:00Z")
    dest = tmp_path / "session"
    status = current_images_store(a, dest)
    assert status[RUNTIME.reference] == "ok"
    assert status[OPERATOR.reference] == "missing"
    entry = json.loads((dest / INDEX_FILE).read_text())["images"][RUNTIME.reference]
    assert entry["rootfs"] == str((store / "rootfs" / f"runtime-{key_a}").resolve())
    # The session's store is used as is (no builds.json): reference -> that root filesystem.
    found = ImageStore(dest, a).resolve(RUNTIME.reference)
    assert found is not None and found.rootfs.name == f"runtime-{key_a}"


def test_a_build_keeps_the_newest_three_keys_per_image(tmp_path: Path, store: Path) -> None:
    repos = [checkout(tmp_path / f"r{i}", f"r{i}") for i in range(KEEP + 1)]
    keys = [build(store, r, OPERATOR, f"2026-12-05T20:0{i}:00Z") for i, r in enumerate(repos)]
    assert KEEP == 3
    on_disk = {p.name for p in (store / "rootfs").iterdir()}
    assert on_disk == {f"operator-{k}" for k in keys[1:]}
    builds = read_json(store / INDEX_FILE)["builds"][OPERATOR.reference]
    assert set(builds) == set(keys[1:])
    # The oldest checkout's build is gone: it is told so, not handed another's build.
    oldest = ImageStore(store, repos[0])
    assert oldest.resolve(OPERATOR.reference) is None
    assert image_status(repos[0])[OPERATOR.reference] == "stale"


def test_another_checkouts_build_only_is_an_error_naming_make_images(
    tmp_path: Path, store: Path
) -> None:
    a, b = checkout(tmp_path / "a", "a"), checkout(tmp_path / "b", "b")
    build(store, b, OPERATOR, "2026-12-05T20:05:00Z")
    images = ImageStore(store, a)
    problem = images.lookup(OPERATOR.reference)
    assert isinstance(problem, str)
    assert "`make images`" in problem and str(a) in problem
    assert images.resolve(OPERATOR.reference) is None
    # Never built on this machine: no error, the host-command table applies.
    assert images.lookup(RUNTIME.reference) is None


def test_a_source_edit_stops_resolving_the_old_build(tmp_path: Path, store: Path) -> None:
    a = checkout(tmp_path / "a", "a")
    build(store, a, OPERATOR, "2026-12-05T20:00:00Z")
    (a / "operator" / "code.py").write_text("VERSION = 'edited'\n")
    assert isinstance(ImageStore(store, a).lookup(OPERATOR.reference), str)
    assert image_status(a)[OPERATOR.reference] == "stale"


def test_an_index_from_before_per_key_builds_is_kept_by_the_next_build(
    tmp_path: Path, store: Path
) -> None:
    """The store as the previous build wrote it: one entry per reference under ``images``,
    its base ids in ``builds.json``. It resolves, and b's build keeps it."""
    a, b = checkout(tmp_path / "a", "a"), checkout(tmp_path / "b", "b")
    key_a = input_key(a, OPERATOR, BASE_IDS, BUILDER)
    (store / "rootfs" / f"operator-{key_a}" / "usr").mkdir(parents=True)
    entry = {"rootfs": f"rootfs/operator-{key_a}", "config": {}, "key": key_a}
    write_json(store / INDEX_FILE, {"images": {OPERATOR.reference: entry}})
    write_json(store / RECORD_FILE, {"operator": {"key": key_a, "baseIds": BASE_IDS,
                                                  "builder": BUILDER, "builtAt": "x"}})  # fmt: skip
    found = ImageStore(store, a).resolve(OPERATOR.reference)
    assert found is not None and found.rootfs.name == f"operator-{key_a}"
    build(store, b, OPERATOR, "2026-12-05T20:05:00Z")
    found = ImageStore(store, a).resolve(OPERATOR.reference)
    assert found is not None and found.rootfs.name == f"operator-{key_a}"


def test_without_a_checkout_the_most_recent_build_resolves(tmp_path: Path, store: Path) -> None:
    a, b = checkout(tmp_path / "a", "a"), checkout(tmp_path / "b", "b")
    build(store, a, OPERATOR, "2026-12-05T20:00:00Z")
    key_b = build(store, b, OPERATOR, "2026-12-05T20:05:00Z")
    found = ImageStore(store).resolve(OPERATOR.reference)
    assert found is not None and found.rootfs.name == f"operator-{key_b}"


def pod_worker(images: ImageStore, tmp_path: Path, image: str) -> PodWorker:
    """A pod worker over a node that only has image tables (the image decision needs no
    apiserver: it runs before the pod's first status write)."""
    node = SimpleNamespace(client=None, pods_dir=tmp_path / "pods", image_store=images,
                           image_map=ImageMap.load(None))  # fmt: skip
    pod = {"metadata": {"namespace": "ns", "name": "p", "uid": "u"},
           "spec": {"containers": [{"name": "c", "image": image}]}}  # fmt: skip
    return PodWorker(cast(NodeContext, node), pod)


def test_the_pod_fails_to_pull_rather_than_run_the_host_command(
    tmp_path: Path, store: Path
) -> None:
    """Another checkout's build only: no fallback to the built-in host-command rule (which
    matches ``*swarmkit-operator``); the ErrImagePull message is the store's, naming
    ``make images``. Never built: the host-command rule, as before."""
    a, b = checkout(tmp_path / "a", "a"), checkout(tmp_path / "b", "b")
    build(store, b, OPERATOR, "2026-12-05T20:05:00Z")
    worker = pod_worker(ImageStore(store, a), tmp_path, OPERATOR.reference)
    c = worker.containers["c"]
    assert worker._image(c) is None
    message = worker._unknown_image_message(c)
    assert "`make images`" in message and str(a) in message and "key " in message
    runtime = pod_worker(ImageStore(store, a), tmp_path, RUNTIME.reference)
    assert isinstance(runtime._image(runtime.containers["c"]), ImageRule)


def test_a_build_a_node_runs_pods_from_outlives_newer_builds(tmp_path: Path, store: Path) -> None:
    """A CI clone's session lost its runtime root filesystem to three `make images` of other
    checkouts during its run; its pods then ran host commands instead of the image."""
    repos = [checkout(tmp_path / f"r{i}", f"r{i}") for i in range(KEEP + 2)]
    first = build(store, repos[0], RUNTIME, "2026-12-05T20:00:00Z")
    # A node of the first checkout (another process, as the process node is) starts a pod.
    node = subprocess.Popen(
        [sys.executable, "-c", NODE.format(store=str(store), repo=str(repos[0]))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "SWARMKIT_CACHE_DIR": str(store.parent)},
    )  # fmt: skip
    try:
        assert node.stdout is not None and node.stdout.readline().strip() == f"runtime-{first}"
        keys = [
            build(store, r, RUNTIME, f"2026-12-05T20:1{i}:00Z") for i, r in enumerate(repos[1:])
        ]
        assert (store / "rootfs" / f"runtime-{first}" / "usr").is_dir()
        builds = read_json(store / INDEX_FILE)["builds"][RUNTIME.reference]
        assert set(builds) == {first, *keys[-KEEP:]}  # the unleased older build went
        assert not (store / "rootfs" / f"runtime-{keys[0]}").exists()
    finally:
        node.communicate("")
    # Once no node runs it, the next build prunes it.
    build(store, repos[1], RUNTIME, "2026-12-05T20:30:00Z")
    assert not (store / "rootfs" / f"runtime-{first}").exists()
    assert first not in read_json(store / INDEX_FILE)["builds"][RUNTIME.reference]


NODE = """
import sys
from pathlib import Path
from swarmkit_devcluster.process_node.images import ImageStore
found = ImageStore(Path({store!r}), Path({repo!r})).resolve({ref!r})
print(found.rootfs.name if found else "none", flush=True)
sys.stdin.read()
""".replace("{ref!r}", repr(RUNTIME.reference))
