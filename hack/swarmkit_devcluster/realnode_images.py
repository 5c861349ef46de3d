"""Images for the real node without a registry: OCI image-layout archives that
``ctr -n k8s.io images import`` takes. Two are built here: the sandbox (pause) image, a tiny static
C program compiled with the host's gcc, and a busybox image (Debian's ``busybox-static`` plus a
``nonroot`` user 65532) for the tests' probe pods. Pure stdlib; cached by content."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path

PAUSE_REF = "registry.k8s.io/pause:3.10.1"
BUSYBOX_REF = "swarmkit.local/busybox:1.35"

# The sandbox process: sleep until told to stop, reap children (it is PID 1 of the pod).
_PAUSE_C = r"""
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void stop(int s) { (void)s; _exit(0); }
static void reap(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
    signal(SIGINT, stop); signal(SIGTERM, stop); signal(SIGCHLD, reap);
    for (;;) pause();
}
"""

_APPLETS = (
    "sh", "id", "cat", "ls", "touch", "nc", "sleep", "echo", "grep", "head", "tr", "true",
    "nslookup",
)  # fmt: skip


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def _dir(tar: tarfile.TarFile, name: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, 0
    tar.addfile(info, None)


def image_layer(
    files: dict[str, tuple[bytes, int]], links: dict[str, str], dirs: dict[str, int]
) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d, mode in dirs.items():
            _dir(tar, d, mode)
        for name, (data, mode) in files.items():
            _add(tar, name, data, mode)
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mtime = tarfile.SYMTYPE, target, 0
            tar.addfile(info)
    return buf.getvalue()


def _blob(out: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    _add(out, f"blobs/sha256/{digest}", data)
    return digest


def write_archive(path: Path, ref: str, layer: bytes, config: dict[str, object]) -> Path:
    """One-layer OCI archive at ``path`` whose index names the image ``ref`` for containerd."""
    layer_digest = hashlib.sha256(layer).hexdigest()
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
    }
    cfg = json.dumps(image_config, sort_keys=True).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as out:
        _add(out, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        _blob(out, layer)
        cfg_digest = _blob(out, cfg)
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": f"sha256:{cfg_digest}",
                    "size": len(cfg),
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": f"sha256:{layer_digest}",
                        "size": len(layer),
                    }
                ],
            }
        ).encode()
        man_digest = _blob(out, manifest)
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": f"sha256:{man_digest}",
                    "size": len(manifest),
                    "annotations": {
                        "io.containerd.image.name": ref,
                        "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[1],
                    },
                }
            ],
        }
        _add(out, "index.json", json.dumps(index).encode())
    return path


def pause_archive(out_dir: Path) -> Path:
    """The sandbox image: the static pause program above, compiled with ``gcc -static``."""
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "pause.c", Path(tmp) / "pause"
        src.write_text(_PAUSE_C)
        subprocess.run(["gcc", "-static", "-Os", "-s", "-o", str(exe), str(src)], check=True)
        layer = image_layer({"pause": (exe.read_bytes(), 0o755)}, {}, {})
    return write_archive(out_dir / "pause.oci.tar", PAUSE_REF, layer, {"Entrypoint": ["/pause"]})


def busybox_path(out_dir: Path) -> Path:
    """Keyed by the applet list: a new applet makes a new archive, not a stale cached one."""
    key = hashlib.sha256(" ".join(_APPLETS).encode()).hexdigest()[:12]
    return out_dir / f"busybox-{key}.oci.tar"


def busybox_archive(out_dir: Path, busybox: Path = Path("/bin/busybox")) -> Path:
    """A busybox image whose default user is ``nonroot`` (65532), for the real-node tests."""
    files = {
        "bin/busybox": (busybox.read_bytes(), 0o755),
        "etc/passwd": (b"root:x:0:0:root:/:/bin/sh\nnonroot:x:65532:65532::/tmp:/bin/sh\n", 0o644),
        "etc/group": (b"root:x:0:\nnonroot:x:65532:\n", 0o644),
    }
    links = {f"bin/{a}": "busybox" for a in _APPLETS}
    layer = image_layer(files, links, {"bin": 0o755, "etc": 0o755, "tmp": 0o1777})
    return write_archive(
        busybox_path(out_dir), BUSYBOX_REF, layer, {"Cmd": ["sh"], "User": "65532"}
    )


def project_archives(out_dir: Path, repo: Path) -> list[tuple[str, Path]]:
    """(reference, archive) of each image ``make images`` built from *this* checkout's sources.

    The image store is machine-wide: another worktree's ``make images`` retags the same
    references with its own build. So the archive is keyed by the build key of this checkout
    (the key ``image_status`` computes): pushed from buildah's storage (``buildah push …
    oci-archive:``) while the store holds that build, then reused from the archive even after
    another worktree rebuilt. An image with neither (never built from these sources) is left
    out, never replaced by someone else's build. The newest :data:`KEEP` archives per image
    stay (worktrees alternate)."""
    from swarmkit_devcluster.imagebuild import pins
    from swarmkit_devcluster.imagebuild.build import (
        INDEX_FILE,
        RECORD_FILE,
        input_key,
        read_json,
        store_dir,
    )
    from swarmkit_devcluster.imagebuild.tools import Buildah

    index = read_json(store_dir() / INDEX_FILE).get("images") or {}
    records = read_json(store_dir() / RECORD_FILE)
    out: list[tuple[str, Path]] = []
    for spec in pins.IMAGES:
        rec = records.get(spec.name) or {}
        key = input_key(repo, spec, rec.get("baseIds") or {}, str(rec.get("builder", "")))
        path = out_dir / f"{spec.name}-{key}.oci.tar"
        if not path.exists():
            if (index.get(spec.reference) or {}).get("key") != key:
                continue
            tmp = path.with_suffix(".tmp")
            ref = spec.reference
            Buildah(store_dir() / "buildah")("push", "--quiet", ref, f"oci-archive:{tmp}:{ref}")
            tmp.replace(path)
        path.touch()
        old = sorted(out_dir.glob(f"{spec.name}-*.oci.tar"), key=lambda f: -f.stat().st_mtime)
        for stale in old[KEEP:]:
            stale.unlink()
        out.append((spec.reference, path))
    return out


#: Archives kept per project image (one per build key; a few worktrees alternate).
KEEP = 4
