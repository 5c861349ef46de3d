"""The process node: a kubelet stand-in that runs pods as local processes.

Run it with ``python -m swarmkit_devcluster.process_node --kubeconfig K --state-dir D``
(``swarmkit_devcluster up`` and the pytest fixtures start it for you). It registers a Ready
``Node`` (default name ``process-node``), keeps its ``Lease`` in ``kube-node-lease`` fresh,
watches the pods bound to it and runs each container as a local process group in its own
mount namespace. It needs root, or unprivileged user namespaces (then the launcher does what
``unshare -Urm`` does; ``runAsUser`` other than 0 cannot be honoured there, since only the
caller's uid is mapped).

Images
------
An image whose reference (exactly as the pod spells it) is in the *image store*
(``--image-store DIR``, default ``$SWARMKIT_NODE_IMAGE_STORE`` or
``~/.cache/swarmkit-operator/images``, filled by ``make images``; ``index.json`` maps each
reference to a root filesystem and its OCI config: Entrypoint, Cmd, Env, WorkingDir, User)
runs *in that root filesystem* (the repository's own images, in the store ``make images``
writes, resolve to the build of the checkout the node runs from: :class:`images.ImageStore`).
Any other image is mapped to a local command by a table (the
host-command fallback). The built-in table (override with ``--image-map FILE`` or
``$SWARMKIT_NODE_IMAGE_MAP``, a YAML/JSON file ``{"images": [{"match": GLOB, "entrypoint":
[...], "cmd": [...], "env": {...}}]}``; rules are matched in order against the image
repository, i.e. the reference without ``:tag``/``@digest``, and then against the full
reference):

* ``*swarmkit-runtime`` → entrypoint ``[<python>, -m, swarmkit_runner]``
* ``*swarmkit-operator`` → entrypoint ``[<python>, -m, swarmkit_operator]``
* ``python``, ``*/python`` (e.g. ``docker.io/library/python:3.12``) → cmd ``[<python>]``

``<python>`` (written ``{python}`` in a table) is the interpreter running the node, i.e. this
venv's python. The container's ``command``, if set, replaces the entrypoint (and the image's cmd)
exactly as in Kubernetes, with ``args`` appended; ``args`` alone replace the image's cmd.
A leading ``python``/``python3``/``python3.N`` of a host command is always the node's
python. An image in neither place leaves the pod ``Pending`` with waiting reason
``ErrImagePull``.

The container's view
--------------------
Every container runs through the launcher (:mod:`.sandbox`) in its own mount namespace, so
paths are real: volumes are bind-mounted at their ``mountPath`` (read-only when
``readOnly``), ``terminationMessagePath`` (default ``/dev/termination-log``) is a per-container
file bind-mounted there, ``/dev`` is a private minimal tmpfs (null, zero, full, random,
urandom, tty, shm, pts), ``/proc`` and ``/sys`` (read-only) are the host's. Nothing a pod does
at those paths reaches the host.

* **Image pods**: the root is an overlay of the image's root filesystem and a per-container
  writable layer (discarded on restart), read-only with ``readOnlyRootFilesystem``;
  ``runAsUser``/``runAsGroup`` (else the image's ``USER``), ``fsGroup`` and
  ``supplementalGroups`` are honoured, ``allowPrivilegeEscalation: false`` sets
  no_new_privs; the pod's hostname is the pod name (UTS namespace), ``/etc/hosts`` and
  ``/etc/hostname`` are the pod's, ``/etc/resolv.conf`` the node's. The environment is
  exactly the pod's: ``PATH`` and the image's ``Env``, then ``envFrom``/``env``, plus
  ``HOSTNAME`` and ``KUBERNETES_SERVICE_HOST``/``_PORT`` (like a kubelet).
* **Host-command pods**: the root mirrors the host (its top-level directories bind-mounted;
  one in which a mount point must be created is an overlay, so the host never changes) and
  the process runs as the node's user (``runAsUser`` and ``readOnlyRootFilesystem`` are not
  applied: the host's files are not the image's). If a volume is mounted over the node's
  interpreter or checkout (e.g. an emptyDir at ``/tmp`` with the repository in ``/tmp``),
  those directories are bind-mounted back. Env: ``HOSTNAME`` (pod name), ``HOME`` and
  ``TMPDIR`` (per-container directories of the pod dir), ``PATH`` (node's, venv first),
  the cluster marker, the image rule's env, then ``envFrom``/``env``.

Volumes get the kubelet's permissions: an emptyDir is 0777; with ``fsGroup`` every file
belongs to that group (group-readable, group-writable for an emptyDir); projected tokens
belong to the containers' common ``runAsUser``. In-cluster config:
``KUBERNETES_SERVICE_HOST=127.0.0.1`` and ``KUBERNETES_SERVICE_PORT`` (the apiserver's
port); the CA is the cluster CA, valid for 127.0.0.1; the token, CA and namespace are at
``/var/run/secrets/kubernetes.io/serviceaccount`` (projected token refreshed at 80 % of its
lifetime), so ``kubernetes.config.load_incluster_config()`` and kopf's own login work.

``env`` (with ``$(VAR)`` expansion) and ``valueFrom``: ``secretKeyRef``,
``configMapKeyRef``, ``fieldRef`` (``metadata.name|namespace|uid|labels['k']|annotations['k']``,
``spec.nodeName``, ``spec.serviceAccountName``, ``status.podIP``, ``status.hostIP``) and
``resourceFieldRef``.

Volumes: ``configMap``, ``secret``, ``emptyDir``, ``downwardAPI``, ``projected``
(``serviceAccountToken`` via the TokenRequest API, ``configMap``, ``secret``, ``downwardAPI``) and
``hostPath``; they are materialized once at pod start (no live updates). Other volume
types become empty directories (with a warning in the node log).

Resource limits (:mod:`.limits`): a cgroup v2 per container (``memory.max``, ``cpu.max``) when
the node has a writable cgroup v2 delegating memory and cpu; otherwise the memory limit is
``RLIMIT_DATA`` (an allocation beyond it fails: ``MemoryError``, not an OOM kill) and CPU
limits are not enforced. Events (:mod:`.events`): Pulled, Created, Started, Failed (image,
config or start errors), BackOff, Killing, DeadlineExceeded, as a kubelet writes them.

Lifecycle: init containers run first, one at a time (sidecars with ``restartPolicy: Always``
are started and kept running); ``restartPolicy`` Never/OnFailure/Always honoured with a short
backoff; pod ``activeDeadlineSeconds`` → kill, phase ``Failed`` reason ``DeadlineExceeded``;
deletion → SIGTERM to every process group, SIGKILL after ``min(grace, 5 s)``, then the pod
object is deleted with grace 0. A container that cannot be created (missing command, bad
user) terminates with exit code 128, reason ``StartError``. Logs:
``<state>/pods/<namespace>_<pod>/<container>.log`` (stdout+stderr), served on the node's
kubelet port so ``kubectl logs [-f]`` works. Probes are ignored (a running container is ready).

Modules
-------
:mod:`.node` (registration, lease, pod watch), :mod:`.pod` (one pod's lifecycle),
:mod:`.containers` (a container as a process group), :mod:`.sandbox` (the launcher: mount
namespace, root filesystem, user, exec), :mod:`.images` (image store and table),
:mod:`.env` (env and what it refers to), :mod:`.volumes` (volumes), :mod:`.limits`,
:mod:`.events`, :mod:`.status` (status builders), :mod:`.kubelet_server` (the logs port),
:mod:`.times`, :mod:`.cli` (the command line). Layers (import-linter): cli → node → pod →
status → containers → volumes → limits/events → env/images → times/sandbox.
"""

from __future__ import annotations

from swarmkit_devcluster.process_node.cli import main
from swarmkit_devcluster.process_node.containers import MARKER_ENV, ContainerRun
from swarmkit_devcluster.process_node.env import ConfigError, expand_vars, parse_quantity
from swarmkit_devcluster.process_node.images import (
    BUILTIN_IMAGE_RULES,
    PYTHON_ALIASES,
    ImageMap,
    ImageRule,
    ImageStore,
    LocalImage,
    build_argv,
    image_repository,
)
from swarmkit_devcluster.process_node.node import DEFAULT_NODE_NAME, NOT_READY_TAINTS, ProcessNode
from swarmkit_devcluster.process_node.pod import GRACE_CAP_SECONDS, PodWorker
from swarmkit_devcluster.process_node.status import KUBELET_VERSION
from swarmkit_devcluster.process_node.times import now_micro, now_rfc3339, parse_time
from swarmkit_devcluster.process_node.volumes import SA_MOUNT

__all__ = [
    "BUILTIN_IMAGE_RULES",
    "DEFAULT_NODE_NAME",
    "GRACE_CAP_SECONDS",
    "KUBELET_VERSION",
    "MARKER_ENV",
    "NOT_READY_TAINTS",
    "PYTHON_ALIASES",
    "SA_MOUNT",
    "ConfigError",
    "ContainerRun",
    "ImageMap",
    "ImageRule",
    "ImageStore",
    "LocalImage",
    "PodWorker",
    "ProcessNode",
    "build_argv",
    "expand_vars",
    "image_repository",
    "main",
    "now_micro",
    "now_rfc3339",
    "parse_quantity",
    "parse_time",
]
