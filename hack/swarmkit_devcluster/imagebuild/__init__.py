"""``make images``: the runtime and operator images built for real, without a Docker daemon
(buildah from Debian's packages, vfs storage, chroot isolation), on base images made here
(debootstrap, the npm registry) because no container registry is reachable; their root
filesystems are exported into the process node's image store (``<cache>/images``). See
:mod:`.pins` for what is pinned, :mod:`.bases` for the bases and :mod:`.build` for the cache.
"""

from swarmkit_devcluster.imagebuild.build import (
    build_images,
    current_images_store,
    image_status,
    store_dir,
)
from swarmkit_devcluster.imagebuild.tools import ImageBuildError

__all__ = [
    "ImageBuildError",
    "build_images",
    "current_images_store",
    "image_status",
    "store_dir",
]
