"""The plugin's one door to the cluster: the ``kubernetes`` client, configured like kubectl.

Configuration comes from ``--kubeconfig``, then ``$KUBECONFIG`` (several files merged as
kubectl merges them), then ``~/.kube/config``, then the in-cluster service account; the
context from ``--context``, else the current one; ``--as``/``--as-group`` impersonate; the
namespace from ``-n``, else the context's namespace, else ``default``. ``kubernetes`` is
imported only here and only when a subcommand needs the cluster, so ``import`` and ``pin
SKILL_DIR`` work without it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from swarmkit_api import GROUP, KINDS_BY_NAME, VERSION
from swarmkit_api.decoding import loads

from .plugin import CommandError, UsageError

#: A Kubernetes object name (DNS subdomain).
OBJECT_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def check_name(kind: str, name: str) -> str:
    """``name`` when it can name an object of ``kind``, else UsageError (before any call)."""
    if not OBJECT_NAME.match(name):
        raise UsageError(
            f"{name!r} is not a {kind} name (lowercase letters, digits, '-' and '.', "
            "at most 253 characters)"
        )
    return name


@dataclass
class Kube:
    """API clients and the namespace the command works in."""

    api_client: Any
    namespace: str

    @property
    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    @property
    def custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api_client)

    def get(self, kind: str, name: str) -> dict[str, Any]:
        """One swarmkit.dev object of ``kind`` (e.g. ``Run``) by name, or CommandError.

        A name that is no object name at all (empty, as ``skill/`` gives, or with a slash)
        is a UsageError: asking the apiserver would list the kind instead.
        """
        from kubernetes.client.exceptions import ApiException

        check_name(kind, name)

        plural = KINDS_BY_NAME[kind].plural
        try:
            obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, name
            )
        except ApiException as exc:
            if exc.status == 404:
                raise CommandError(
                    f"{kind} {name!r} not found in namespace {self.namespace!r}"
                ) from None
            raise CommandError(f"reading {kind} {name!r}: {exc.status} {exc.reason}") from None
        return obj

    def list(self, kind: str) -> list[dict[str, Any]]:
        """Every swarmkit.dev object of ``kind`` in the namespace (paged)."""
        return list(self._paged(kind))

    def _paged(self, kind: str) -> Iterator[dict[str, Any]]:
        from kubernetes.client.exceptions import ApiException

        plural = KINDS_BY_NAME[kind].plural
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": 500}
            if token:
                kwargs["_continue"] = token
            try:
                # Decoded here: an object nested too deep for json.loads is read with
                # that value cut (swarmkit_api.decoding), never a traceback.
                response = self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, plural, _preload_content=False, **kwargs
                )
                page = loads(response.data)
            except ApiException as exc:
                raise CommandError(
                    f"listing {plural} in {self.namespace!r}: {exc.status} {exc.reason}"
                ) from None
            yield from page.get("items", [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def close(self) -> None:
        self.api_client.close()


def connect(
    kubeconfig: str | None,
    namespace: str | None,
    *,
    context: str | None = None,
    as_user: str | None = None,
    as_group: str | None = None,
) -> Kube:
    """A :class:`Kube` for the chosen context, or CommandError saying what is missing.

    The kubeconfig is ``--kubeconfig`` alone, else every file of ``$KUBECONFIG`` merged as
    kubectl merges them (the first file to define a cluster, user, context or the current
    context wins; relative certificate paths are relative to the file naming them), else
    ``~/.kube/config``, else the in-cluster service account.
    """
    try:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException
    except ImportError:  # pragma: no cover - depends on the install
        raise CommandError(
            "this command needs the 'kubernetes' package: pip install 'swarmkit-operator[cli]'"
        ) from None
    api_client: Any
    context_ns = "default"
    paths = kubeconfig_paths(kubeconfig)
    merged = merge_kubeconfigs(paths)
    if merged is not None:
        chosen = context or merged.get("current-context")
        if not chosen:
            raise CommandError(f"no current context in {', '.join(paths)}; pass --context")
        ctx = next((c for c in merged["contexts"] if c.get("name") == chosen), None)
        if ctx is None:
            raise CommandError(f"context {chosen!r} not found in {', '.join(paths)}")
        try:
            api_client = config.new_client_from_config_dict(  # type: ignore[no-untyped-call]
                merged, context=chosen
            )
        except (ConfigException, TypeError, ValueError) as exc:
            raise CommandError(f"kubeconfig context {chosen!r}: {exc}") from None
        ns = (ctx.get("context") or {}).get("namespace")
        context_ns = ns if isinstance(ns, str) and ns else context_ns
    else:
        if kubeconfig is not None:
            raise CommandError(f"kubeconfig {kubeconfig!r} not found")
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except ConfigException:
            raise CommandError(
                f"no usable kubeconfig (looked at {', '.join(paths)}) and not in a cluster"
            ) from None
        api_client = client.ApiClient()
    if as_user:
        api_client.set_default_header("Impersonate-User", as_user)
    if as_group:
        api_client.set_default_header("Impersonate-Group", as_group)
    return Kube(api_client, namespace or context_ns)


def kubeconfig_paths(kubeconfig: str | None) -> list[str]:
    if kubeconfig:
        return [kubeconfig]
    env = os.environ.get("KUBECONFIG", "")
    paths = [p for p in env.split(os.pathsep) if p]
    return paths or [os.path.expanduser("~/.kube/config")]


def merge_kubeconfigs(paths: list[str]) -> dict[str, Any] | None:
    """kubectl's merge of several kubeconfig files; None when none of them exists."""
    merged: dict[str, Any] = {"clusters": [], "contexts": [], "users": []}
    found = False
    for raw in paths:
        path = Path(os.path.expanduser(raw))
        if not path.is_file():
            continue
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise CommandError(f"kubeconfig {raw}: {exc}") from None
        found = True
        if data.get("current-context") and not merged.get("current-context"):
            merged["current-context"] = data["current-context"]
        for section, fields in _FILE_FIELDS.items():
            names = {item.get("name") for item in merged[section]}
            for item in data.get(section) or []:
                if item.get("name") in names:
                    continue  # the first file defining a name wins
                body = dict(item.get(section[:-1]) or {})
                for key in fields:
                    value = body.get(key)
                    if isinstance(value, str) and value and not os.path.isabs(value):
                        body[key] = str((path.parent / value).resolve())
                merged[section].append({**item, section[:-1]: body})
    return merged if found else None


#: kubeconfig fields holding file paths, relative to the file that names them
_FILE_FIELDS = {
    "clusters": ("certificate-authority",),
    "users": ("client-certificate", "client-key", "tokenFile"),
    "contexts": (),
}
