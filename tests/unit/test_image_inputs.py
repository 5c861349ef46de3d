"""The image cache key covers what each Dockerfile copies: every build-context source of a
COPY line (README.md excepted, by design: it is only the package's long description) lies
under one of the image's ``context_paths``, so editing it rebuilds the image."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from swarmkit_devcluster.imagebuild.pins import IMAGES, ImageSpec

REPO = Path(__file__).resolve().parents[2]


def copy_sources(dockerfile: Path) -> list[str]:
    sources = []
    for line in dockerfile.read_text().splitlines():
        m = re.match(r"^COPY\s+(?!--from)(.+)$", line.strip())
        if m:
            *srcs, _dest = m.group(1).split()
            sources += [s.rstrip("/") for s in srcs]
    return sources


@pytest.mark.parametrize("spec", IMAGES, ids=lambda s: s.name)
def test_every_copied_path_is_a_cache_input(spec: ImageSpec) -> None:
    sources = copy_sources(REPO / spec.dockerfile)
    assert sources, spec.dockerfile
    for src in sources:
        if src == "README.md":
            continue
        assert (REPO / src).exists(), src
        assert any(src == p or src.startswith(p + "/") for p in spec.context_paths), src
    assert spec.dockerfile in spec.context_paths or any(
        spec.dockerfile.startswith(p + "/") for p in spec.context_paths
    )
