"""What a container's environment and volumes refer to: ``env``/``envFrom``/``valueFrom``,
``$(VAR)`` expansion and resource quantities.

:class:`PodSources` resolves a pod's references — Secrets and ConfigMaps of its namespace, its
own fields (``fieldRef``) and resources (``resourceFieldRef``) — for env and for the volumes
(:mod:`.volumes`) alike. A missing object or key raises :class:`ConfigError`.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from swarmkit_devcluster.kubeapi import JSON, ApiError, KubeClient

_SUFFIX: dict[str, int | Decimal] = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}  # fmt: skip


def parse_quantity(q: str | int | float) -> Decimal:
    s = str(q).strip()
    m = re.fullmatch(r"([+-]?[0-9.]+(?:[eE][+-]?\d+)?)([a-zA-Z]*)", s)
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"bad quantity {q!r}")
    return Decimal(m.group(1)) * Decimal(_SUFFIX[m.group(2)])


_VAR_RE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand_vars(value: str, env: dict[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: defined vars are replaced, ``$$`` is a literal ``$``."""

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env.get(name, m.group(0))

    return _VAR_RE.sub(repl, value)


class ConfigError(Exception):
    """A referenced Secret/ConfigMap/key is missing: CreateContainerConfigError."""


@dataclass
class PodSources:
    """The objects and values one pod can refer to (read when a pod is prepared)."""

    client: KubeClient
    pod: JSON
    allocatable: Callable[[], dict[str, str]]  # the node's; for resources a container leaves unset

    @property
    def ns(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    def _get(self, kind: str, name: str, optional: bool) -> JSON | None:
        try:
            return self.client.get(f"/api/v1/namespaces/{self.ns}/{kind}/{name}")
        except ApiError as exc:
            if exc.status == 404:
                if optional:
                    return None
                raise ConfigError(f'{kind[:-1]} "{name}" not found') from exc
            raise

    def configmap_data(self, name: str, optional: bool) -> dict[str, bytes] | None:
        cm = self._get("configmaps", name, optional)
        if cm is None:
            return None
        data = {k: v.encode() for k, v in (cm.get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()})
        return data

    def secret_data(self, name: str, optional: bool) -> dict[str, bytes] | None:
        s = self._get("secrets", name, optional)
        if s is None:
            return None
        return {k: base64.b64decode(v) for k, v in (s.get("data") or {}).items()}

    def field_value(self, field_path: str, multiline: bool = False) -> str:
        md = self.pod["metadata"]
        spec = self.pod["spec"]
        m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", field_path)
        if m:
            return str((md.get(m.group(1)) or {}).get(m.group(2), ""))
        simple = {
            "metadata.name": md.get("name", ""),
            "metadata.namespace": md.get("namespace", ""),
            "metadata.uid": md.get("uid", ""),
            "spec.nodeName": spec.get("nodeName", ""),
            "spec.serviceAccountName": spec.get("serviceAccountName", ""),
            "status.podIP": "127.0.0.1",
            "status.podIPs": "127.0.0.1",
            "status.hostIP": "127.0.0.1",
            "status.hostIPs": "127.0.0.1",
        }
        if field_path in simple:
            return str(simple[field_path])
        if field_path in ("metadata.labels", "metadata.annotations") and multiline:
            items = sorted((md.get(field_path.split(".")[1]) or {}).items())
            return "\n".join(f"{k}={json.dumps(v)}" for k, v in items)
        raise ConfigError(f"unsupported fieldRef {field_path!r}")

    def resource_value(self, ref: JSON, container: str | None) -> str:
        cname = ref.get("containerName") or container
        c = next(
            (x for x in self.pod["spec"].get("containers", []) if x["name"] == cname),
            None,
        )
        if c is None:
            raise ConfigError(f"resourceFieldRef: container {cname!r} not found")
        kind, _, res = ref["resource"].partition(".")
        value = ((c.get("resources") or {}).get(kind) or {}).get(res)
        if value is None:
            value = self.allocatable().get(res, "0")
        divisor = parse_quantity(ref.get("divisor") or "1")
        return str(math.ceil(parse_quantity(value) / divisor))

    def value_from(self, vf: JSON, container: str) -> str | None:
        """An env ``valueFrom``; None when an optional reference is missing (var not set)."""
        if "secretKeyRef" in vf:
            ref = vf["secretKeyRef"]
            data = self.secret_data(ref["name"], bool(ref.get("optional")))
            kind = "secret"
        elif "configMapKeyRef" in vf:
            ref = vf["configMapKeyRef"]
            data = self.configmap_data(ref["name"], bool(ref.get("optional")))
            kind = "configmap"
        elif "fieldRef" in vf:
            return self.field_value(vf["fieldRef"]["fieldPath"])
        elif "resourceFieldRef" in vf:
            return self.resource_value(vf["resourceFieldRef"], container)
        else:
            raise ConfigError(f"unsupported valueFrom {list(vf)}")
        if data is None:
            return None
        if ref["key"] not in data:
            if ref.get("optional"):
                return None
            raise ConfigError(f"couldn't find key {ref['key']} in {kind} {self.ns}/{ref['name']}")
        return data[ref["key"]].decode(errors="replace")


def apply_env(env: dict[str, str], spec: JSON, sources: PodSources) -> None:
    """Add a container's ``envFrom`` and then its ``env`` to ``env``, in Kubernetes order (a
    later entry wins; ``$(VAR)`` sees what is defined so far)."""
    for ef in spec.get("envFrom") or []:
        prefix = ef.get("prefix", "")
        if "configMapRef" in ef:
            ref = ef["configMapRef"]
            data = sources.configmap_data(ref["name"], bool(ref.get("optional")))
        else:
            ref = ef["secretRef"]
            data = sources.secret_data(ref["name"], bool(ref.get("optional")))
        for k, v in (data or {}).items():
            env[prefix + k] = v.decode(errors="replace")
    for e in spec.get("env") or []:
        if "valueFrom" in e:
            value = sources.value_from(e["valueFrom"], spec["name"])
            if value is None:
                continue
        else:
            value = expand_vars(e.get("value", ""), env)
        env[e["name"]] = value
