"""Volumes: materialized once, at start, under ``<pod dir>/volumes/<name>``
(:func:`materialize`; projected service-account tokens are kept fresh by
:class:`ProjectedTokens`), owned as the kubelet would own them (:func:`set_ownership`). The
launcher bind-mounts them at each container's ``mountPath`` (see :mod:`.sandbox`).
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import time
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
        self.owner = token_owner(pod)

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
        write_file(path, res["status"]["token"].encode(), mode, self.owner)
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


def write_file(path: Path, data: bytes, mode: int, owner: tuple[int, int] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
        fh.write(data)
    if owner is not None and os.geteuid() == 0:
        os.chown(tmp, *owner)
        if owner[1] != -1:
            mode |= 0o040
    os.chmod(tmp, mode & 0o777 | 0o600)
    os.replace(tmp, path)


def token_owner(pod: JSON) -> tuple[int, int] | None:
    """Who owns projected token files, as the kubelet decides: the containers' runAsUser when
    they all share one, and the pod's fsGroup (group-readable); None: root."""
    spec = pod["spec"]
    pod_sc = spec.get("securityContext") or {}
    uids = {
        (c.get("securityContext") or {}).get("runAsUser", pod_sc.get("runAsUser"))
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
    }
    uid = uids.pop() if len(uids) == 1 else None
    gid = pod_sc.get("fsGroup")
    if uid is None and gid is None:
        return None
    return (-1 if uid is None else int(uid), -1 if gid is None else int(gid))


def set_ownership(target: Path, vol: JSON, fs_group: int | None) -> None:
    """Volume permissions as the kubelet sets them: an emptyDir is world-writable (0777); with
    an ``fsGroup`` every file and directory belongs to that group, group-readable (and
    group-writable for an emptyDir), directories setgid."""
    if "hostPath" in vol or os.geteuid() != 0:
        return
    writable = "emptyDir" in vol
    if writable:
        os.chmod(target, 0o777)
    if fs_group is None:
        return
    for dirpath, _dirs, files in os.walk(target):
        st = os.lstat(dirpath)
        os.chown(dirpath, -1, fs_group)
        os.chmod(dirpath, st.st_mode & 0o7777 | 0o2000 | (0o070 if writable else 0o050))
        for name in files:
            f = os.path.join(dirpath, name)
            st = os.lstat(f)
            if not stat.S_ISREG(st.st_mode):
                continue
            os.lchown(f, -1, fs_group)
            os.chmod(f, st.st_mode & 0o7777 | (0o060 if writable else 0o040))
