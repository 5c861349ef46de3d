"""The process node: a kubelet stand-in that runs pods as local processes.

Run it with ``python -m swarmkit_devcluster.process_node --kubeconfig K --state-dir D``
(``swarmkit_devcluster up`` and the pytest fixtures start it for you). It registers a Ready
``Node`` (default name ``process-node``), keeps its ``Lease`` in ``kube-node-lease`` fresh,
watches the pods bound to it and runs each container as a local process group.

Images
------
There are no images: each container's ``image`` is mapped to a local command by a table.
The built-in table (override with ``--image-map FILE`` or ``$SWARMKIT_NODE_IMAGE_MAP``, a
YAML/JSON file ``{"images": [{"match": GLOB, "entrypoint": [...], "cmd": [...],
"env": {...}}]}``; rules are matched in order against the image repository, i.e. the reference
without ``:tag``/``@digest``, and then against the full reference):

* ``*swarmkit-runtime`` → entrypoint ``[<python>, -m, swarmkit_runner]``
* ``*swarmkit-operator`` → entrypoint ``[<python>, -m, swarmkit_operator]``
* ``python``, ``*/python`` (e.g. ``docker.io/library/python:3.12``) → cmd ``[<python>]``

``<python>`` (written ``{python}`` in a table) is the interpreter running the node, i.e. this
venv's python. The container's ``command``, if set, replaces the entrypoint (and the image's cmd)
exactly as in Kubernetes, with ``args`` appended; ``args`` alone replace the image's cmd.
A leading ``python``/``python3``/``python3.N`` (bare or as an absolute path) is always the node's
python. An unknown image leaves the pod ``Pending`` with waiting reason ``ErrImagePull``.

Filesystem: the path rule
-------------------------
Processes see the host filesystem, so every container gets its own *root directory*
``<state>/pods/<namespace>_<pod>/root/<container>/``. A volume mounted at ``mountPath`` is a
symlink ``<root><mountPath>`` pointing at the materialized volume
(``<state>/pods/<namespace>_<pod>/volumes/<volume>``). **The rule: inside a process-node pod,
the absolute container path P is the host path ``$SWARMKIT_PATH_PREFIX + P``**
(``SWARMKIT_PATH_PREFIX`` is the container root; it is unset on a real cluster, so the
helper below is a no-op there)::

    def pod_path(p: str) -> str:
        prefix = os.environ.get("SWARMKIT_PATH_PREFIX", "").rstrip("/")
        if not prefix or not p.startswith("/") or p == prefix or p.startswith(prefix + "/"):
            return p
        return prefix + p

To make most programs work unchanged, the node also rewrites ``command``/``args`` elements,
``env`` values and ``workingDir`` that start with a volume ``mountPath`` (also after a
``--flag=``/``KEY=`` prefix) to the host path; the helper is idempotent, so applying it to an
already-rewritten path is harmless. Hard-coded paths need the helper:

* the termination message: write to ``pod_path(<terminationMessagePath>)``; the default
  ``/dev/termination-log`` is ``$SWARMKIT_PATH_PREFIX/dev/termination-log`` (the directory
  exists); it is read after exit (max 4096 bytes; ``FallbackToLogsOnError`` supported);
* the service-account token, CA and namespace:
  ``pod_path("/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt,namespace}")``
  (projected token refreshed at 80 % of its lifetime, like the kubelet);
* in-cluster config: ``KUBERNETES_SERVICE_HOST=127.0.0.1`` and ``KUBERNETES_SERVICE_PORT`` (the
  apiserver's port) are set; the CA is the cluster CA, valid for 127.0.0.1. With the Python
  ``kubernetes`` client::

      from kubernetes.config.incluster_config import (
          SERVICE_CERT_FILENAME, SERVICE_TOKEN_FILENAME, InClusterConfigLoader)
      InClusterConfigLoader(token_filename=pod_path(SERVICE_TOKEN_FILENAME),
                            cert_filename=pod_path(SERVICE_CERT_FILENAME)).load_and_set()

  (kopf: an ``@kopf.on.login`` handler returning ``kopf.ConnectionInfo(server=..., ca_path=...,
  token=...)`` from those paths).

Other env: ``HOSTNAME`` (pod name), ``HOME`` (``<root>/root``), ``TMPDIR`` (``<root>/tmp``),
``PATH`` (node's, venv first), ``SWARMKIT_POD_DIR``; ``workingDir`` defaults to the
container root (a relative ``workingDir`` or a non-mount absolute one lives under the root).
Image-map env (e.g. ``PYTHONUNBUFFERED=1`` for the built-in python rules) comes first, then
``envFrom`` then ``env`` (with ``$(VAR)`` expansion); ``valueFrom`` supports ``secretKeyRef``,
``configMapKeyRef``, ``fieldRef`` (``metadata.name|namespace|uid|labels['k']|annotations['k']``,
``spec.nodeName``, ``spec.serviceAccountName``, ``status.podIP``, ``status.hostIP``) and
``resourceFieldRef``.

Volumes: ``configMap``, ``secret``, ``emptyDir``, ``downwardAPI``, ``projected``
(``serviceAccountToken`` via the TokenRequest API, ``configMap``, ``secret``, ``downwardAPI``) and
``hostPath`` (symlinked); they are materialized once at pod start (no live updates). Other volume
types become empty directories (with a warning in the node log).

Lifecycle: init containers run first, one at a time (sidecars with ``restartPolicy: Always``
are started and kept running); ``restartPolicy`` Never/OnFailure/Always honoured with a short
backoff; pod ``activeDeadlineSeconds`` → kill, phase ``Failed`` reason ``DeadlineExceeded``;
deletion → SIGTERM to every process group, SIGKILL after ``min(grace, 5 s)``, then the pod
object is deleted with grace 0. Logs: ``<state>/pods/<namespace>_<pod>/<container>.log``
(stdout+stderr), served on the node's kubelet port so ``kubectl logs [-f]`` works. Resource
limits are not enforced; probes are ignored (a running container is ready).

Modules
-------
:mod:`.node` (registration, lease, pod watch), :mod:`.pod` (one pod's lifecycle),
:mod:`.containers` (a container as a process group), :mod:`.images` (the image table),
:mod:`.env` (env and what it refers to), :mod:`.volumes` (volumes and the path rule),
:mod:`.status` (status builders), :mod:`.kubelet_server` (the logs port), :mod:`.times`,
:mod:`.cli` (the command line).
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
