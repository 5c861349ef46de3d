"""Operator configuration, read once at start-up from a file the chart mounts.

Script approval lives here and nowhere else: no custom resource can widen it. Changing the
file (Helm values → ConfigMap, with a checksum annotation on the Deployment) rolls the
operator, which is what makes a new pin take effect.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_RUNTIME_IMAGE = "ghcr.io/swarmkit-operator/swarmkit-runtime:0.1.0"
CONFIG_ENV = "SWARMKIT_OPERATOR_CONFIG"


class ConfigError(ValueError):
    """The operator configuration file is invalid (names the key)."""


@dataclass(frozen=True)
class AllowedScript:
    skill: str
    path: str
    sha256: str
    namespace: str | None = None

    def matches(self, namespace: str, skill: str, path: str) -> bool:
        return (
            self.skill == skill
            and self.path == path
            and (self.namespace is None or self.namespace == namespace)
        )


@dataclass(frozen=True)
class OperatorConfig:
    allow_script_execution: bool = False
    allowed_scripts: tuple[AllowedScript, ...] = ()
    runtime_image: str = DEFAULT_RUNTIME_IMAGE
    watch_namespaces: tuple[str, ...] = ()
    max_job_recreations: int = 2
    #: Content hashes kept per Skill in the skill library's version history.
    skill_history_limit: int = 10
    extra: dict[str, Any] = field(default_factory=dict)

    def pin_for(self, namespace: str, skill: str, path: str) -> AllowedScript | None:
        for entry in self.allowed_scripts:
            if entry.matches(namespace, skill, path):
                return entry
        return None


def _require(cond: bool, key: str, expected: str) -> None:
    if not cond:
        raise ConfigError(f"operator config: {key}: expected {expected}")


def parse_config(data: dict[str, Any] | None) -> OperatorConfig:
    data = data or {}
    _require(isinstance(data, dict), "<root>", "a mapping")
    security = data.get("security") or {}
    skills = security.get("skills") or {}
    _require(isinstance(skills, dict), "security.skills", "a mapping")
    allow = skills.get("allowScriptExecution", False)
    _require(isinstance(allow, bool), "security.skills.allowScriptExecution", "a boolean")
    entries = []
    for i, raw in enumerate(skills.get("allowed") or []):
        key = f"security.skills.allowed[{i}]"
        _require(isinstance(raw, dict), key, "a mapping with skill, path, sha256")
        for name in ("skill", "path", "sha256"):
            _require(isinstance(raw.get(name), str) and raw[name], f"{key}.{name}", "a string")
        sha = raw["sha256"].lower()
        _require(
            len(sha) == 64 and all(c in "0123456789abcdef" for c in sha),
            f"{key}.sha256",
            "64 hex digits (no unpinned entries)",
        )
        entries.append(AllowedScript(raw["skill"], raw["path"], sha, raw.get("namespace")))
    runtime = data.get("runtime") or {}
    image = runtime.get("image", DEFAULT_RUNTIME_IMAGE)
    _require(isinstance(image, str) and bool(image), "runtime.image", "a non-empty string")
    namespaces = data.get("watchNamespaces") or []
    _require(isinstance(namespaces, list), "watchNamespaces", "a list of namespaces")
    recreations = data.get("maxJobRecreations", 2)
    _require(isinstance(recreations, int) and recreations >= 0, "maxJobRecreations", "an int")
    library = data.get("skillLibrary") or {}
    _require(isinstance(library, dict), "skillLibrary", "a mapping")
    history = library.get("historyLimit", 10)
    _require(
        isinstance(history, int) and not isinstance(history, bool) and 1 <= history <= 100,
        "skillLibrary.historyLimit",
        "an int from 1 to 100",
    )
    return OperatorConfig(
        skill_history_limit=history,
        allow_script_execution=allow,
        allowed_scripts=tuple(entries),
        runtime_image=image,
        watch_namespaces=tuple(str(n) for n in namespaces),
        max_job_recreations=recreations,
    )


def load_config(path: str | os.PathLike[str] | None = None) -> OperatorConfig:
    """Load from ``path`` or $SWARMKIT_OPERATOR_CONFIG; no file means safe defaults."""
    path = path or os.environ.get(CONFIG_ENV)
    if not path:
        return OperatorConfig()
    text = Path(path).read_text()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"operator config {path}: not valid YAML: {exc}") from None
    return parse_config(data)
