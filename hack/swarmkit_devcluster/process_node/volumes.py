"""Volumes and the path rule (see the package docstring).

A pod's volumes are materialized once, at start, under ``<pod dir>/volumes/<name>``
(:func:`materialize`; projected service-account tokens are kept fresh by
:class:`ProjectedTokens`). Each container's ``volumeMounts`` become symlinks
``<root><mountPath>`` (:func:`link_mounts`), and :func:`path_rewriter` turns container paths
under a mount into host paths.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from swarmkit_devcluster.kubeapi import JSON, KubeClient
from swarmkit_devcluster.process_node.env import ConfigError, PodSources
from swarmkit_devcluster.process_node.times import parse_time

log = logging.getLogger("process-node")

SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class ProjectedTokens:
    """A pod's projected ``serviceAccountToken`` files, issued with the TokenRequest API (bound
    to the pod) and re-issued at 80 % of their lifetime, like the kubelet."""

    def __init__(self, client: KubeClient, pod: JSON) -> None:
        md = pod["metadata"]
        self.client = client
        self.ns: str = md["namespace"]
        self.pod_name: str = md["name"]
        self.uid: str = md["uid"]
        self.service_account: str = pod["spec"].get("serviceAccountName") or "default"
        self.tokens: list[tuple[float, JSON, Path]] = []  # (refresh_at, source, file)

    def issue(self, src: JSON, path: Path, mode: int) -> None:
        exp = int(src.get("expirationSeconds") or 3600)
        body: JSON = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [src["audience"]] if src.get("audience") else [],
                "expirationSeconds": exp,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": self.pod_name,
                    "uid": self.uid,
                },
            },
        }
        res = self.client.create(
            f"/api/v1/namespaces/{self.ns}/serviceaccounts/{self.service_account}/token", body
        )
        write_file(path, res["status"]["token"].encode(), mode)
        expires = parse_time(res["status"].get("expirationTimestamp")) or time.time() + exp
        refresh_at = time.time() + 0.8 * max(60.0, expires - time.time())
        self.tokens = [t for t in self.tokens if t[2] != path] + [
            (refresh_at, {**src, "_mode": mode}, path)
        ]

    def refresh(self) -> None:
        for refresh_at, src, path in list(self.tokens):
            if time.time() >= refresh_at:
                try:
                    self.issue(src, path, int(src["_mode"]))
                except Exception as exc:
                    log.warning("%s/%s: token refresh failed: %s", self.ns, self.pod_name, exc)

    def clear(self) -> None:
        self.tokens = []


def materialize(vol: JSON, target: Path, sources: PodSources, tokens: ProjectedTokens) -> Path:
    """Create volume ``vol`` at ``target`` (a directory, or a symlink for ``hostPath``)."""
    if target.is_symlink():
        target.unlink()
    if "hostPath" in vol:
        host = Path(vol["hostPath"]["path"])
        if vol["hostPath"].get("type") in ("DirectoryOrCreate",):
            host.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        target.symlink_to(host)
        return target
    target.mkdir(parents=True, exist_ok=True)
    if "emptyDir" in vol:
        return target
    if "configMap" in vol:
        _project_configmap(vol["configMap"], target, vol["configMap"].get("defaultMode"), sources)
    elif "secret" in vol:
        _project_secret(vol["secret"], target, vol["secret"].get("defaultMode"), sources)
    elif "downwardAPI" in vol:
        _project_downward(
            vol["downwardAPI"], target, vol["downwardAPI"].get("defaultMode"), sources
        )
    elif "projected" in vol:
        mode = vol["projected"].get("defaultMode")
        for src in vol["projected"].get("sources") or []:
            if "serviceAccountToken" in src:
                _project_token(src["serviceAccountToken"], target, mode, tokens)
            elif "configMap" in src:
                _project_configmap(src["configMap"], target, mode, sources)
            elif "secret" in src:
                _project_secret(src["secret"], target, mode, sources)
            elif "downwardAPI" in src:
                _project_downward(src["downwardAPI"], target, mode, sources)
            else:
                log.warning(
                    "%s/%s: unsupported projected source %s", sources.ns, sources.name, list(src)
                )
    else:
        log.warning(
            "%s/%s: volume %s has an unsupported type; using an empty directory",
            sources.ns,
            sources.name,
            vol["name"],
        )
    return target


def write_items(
    target: Path,
    data: dict[str, bytes],
    items: list[JSON] | None,
    mode: int | None,
    what: str,
) -> None:
    default_mode = 0o644 if mode is None else int(mode)
    if items:
        for it in items:
            if it["key"] not in data:
                raise ConfigError(f'{what}: key "{it["key"]}" not found')
            write_file(target / it["path"], data[it["key"]], int(it.get("mode", default_mode)))
    else:
        for k, v in data.items():
            write_file(target / k, v, default_mode)


def _project_configmap(src: JSON, target: Path, mode: int | None, sources: PodSources) -> None:
    data = sources.configmap_data(src["name"], bool(src.get("optional")))
    if data is not None:
        write_items(target, data, src.get("items"), mode, f'configmap "{src["name"]}"')


def _project_secret(src: JSON, target: Path, mode: int | None, sources: PodSources) -> None:
    name = src.get("secretName") or src.get("name") or ""
    data = sources.secret_data(name, bool(src.get("optional")))
    if data is not None:
        write_items(target, data, src.get("items"), mode, f'secret "{name}"')


def _project_downward(src: JSON, target: Path, mode: int | None, sources: PodSources) -> None:
    for it in src.get("items") or []:
        if "fieldRef" in it:
            value = sources.field_value(it["fieldRef"]["fieldPath"], multiline=True)
        else:
            value = sources.resource_value(it["resourceFieldRef"], None)
        m = int(it.get("mode", 0o644 if mode is None else mode))
        write_file(target / it["path"], value.encode(), m)


def _project_token(src: JSON, target: Path, mode: int | None, tokens: ProjectedTokens) -> None:
    path = target / src.get("path", "token")
    tokens.issue(src, path, 0o600 if mode is None else int(mode))


def write_file(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
        fh.write(data)
    os.chmod(tmp, mode & 0o777 | 0o600)
    os.replace(tmp, path)


# -- mounts and the path rule ---------------------------------------------------------------


def link_mounts(root: Path, volume_mounts: list[JSON], volumes: dict[str, Path]) -> list[str]:
    """Symlink each mount at ``<root><mountPath>`` to its volume (or ``subPath`` in it); returns
    the mount paths, longest first."""
    mounts: list[tuple[str, Path]] = []
    for m in sorted(volume_mounts, key=lambda m: len(m["mountPath"])):
        src = volumes.get(m["name"])
        if src is None:
            raise ConfigError(f'volume "{m["name"]}" not found')
        if m.get("subPath"):
            src = src / m["subPath"]
            if not src.exists():
                src.mkdir(parents=True, exist_ok=True)
        mount_path = "/" + m["mountPath"].strip("/")
        link = Path(str(root) + mount_path)
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.is_dir():
            shutil.rmtree(link)
        link.symlink_to(src.resolve())
        mounts.append((mount_path, link))
    return sorted((mp for mp, _ in mounts), key=len, reverse=True)


def path_rewriter(root: Path, mount_paths: list[str]) -> Callable[[str], str]:
    """A function mapping a value that starts with a mount path (also after a ``--flag=`` /
    ``KEY=`` prefix) to the host path under ``root``; other values are returned unchanged."""

    host_root = str(root)

    def rewrite(value: str) -> str:
        for candidate_start in _path_starts(value):
            tail = value[candidate_start:]
            if tail == host_root or tail.startswith(host_root + "/"):
                return value  # already a host path: rewriting is idempotent
            for mp in mount_paths:
                if tail == mp or tail.startswith(mp + "/"):
                    return value[:candidate_start] + str(root) + tail
        return value

    return rewrite


def _path_starts(value: str) -> list[int]:
    """Offsets where an absolute path may begin: the start, or right after the first '='."""
    starts = [0]
    eq = value.find("=")
    if eq >= 0:
        starts.append(eq + 1)
    return [s for s in starts if value[s : s + 1] == "/"]
