"""The plugin's one door to the cluster: the ``kubernetes`` client, configured like kubectl.

Configuration comes from ``--kubeconfig``, then ``$KUBECONFIG``, then ``~/.kube/config``,
then the in-cluster service account; the namespace from ``-n``, else the kubeconfig
context's namespace, else ``default``. ``kubernetes`` is imported only here and only when a
subcommand needs the cluster, so ``import`` and ``pin SKILL_DIR`` work without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from swarmkit_api import GROUP, KINDS_BY_NAME, VERSION

from .plugin import CommandError


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
        """One swarmkit.dev object of ``kind`` (e.g. ``Run``) by name, or CommandError."""
        from kubernetes.client.exceptions import ApiException

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
                page = self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, plural, **kwargs
                )
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


def connect(kubeconfig: str | None, namespace: str | None) -> Kube:
    """A :class:`Kube` for the current context, or CommandError saying what is missing."""
    try:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException
    except ImportError:  # pragma: no cover - depends on the install
        raise CommandError(
            "this command needs the 'kubernetes' package: pip install 'swarmkit-operator[cli]'"
        ) from None
    api_client: Any
    context_ns = "default"
    try:
        loader_ns = _context_namespace(kubeconfig)
        api_client = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig
        )
        context_ns = loader_ns or context_ns
    except (ConfigException, FileNotFoundError, TypeError) as kube_exc:
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except ConfigException:
            raise CommandError(f"no usable kubeconfig: {kube_exc}") from None
        api_client = client.ApiClient()
    return Kube(api_client, namespace or context_ns)


def _context_namespace(kubeconfig: str | None) -> str | None:
    from kubernetes import config

    _, current = config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
        config_file=kubeconfig
    )
    ns = (current or {}).get("context", {}).get("namespace")
    return ns if isinstance(ns, str) and ns else None
