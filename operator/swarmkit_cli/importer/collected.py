"""What the readers produce before assembly: pieces of the future manifests, each with the
source place it came from (for cross-checks and error locations)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .findings import Report
from .mapping import Fields, Src

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_SECRET_LOOKING = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
#: The annotation naming where an imported object came from (file:line).
SOURCE_ANNOTATION = "swarmkit.dev/imported-from"
DISPLAY_NAME_ANNOTATION = "swarmkit.dev/display-name"


@dataclass
class Piece:
    """One object (or one Workspace list element) built from a source place."""

    name: str
    body: dict[str, Any]
    src: Src
    annotations: dict[str, str] = field(default_factory=dict)
    #: reader data assembly still needs (an archetype's or a node's unmerged parts)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Collected:
    """Everything read from the sources, before cross-checks and assembly."""

    report: Report
    workspace: str = "default"
    secret: str = "default-credentials"
    #: True when --workspace named the Workspace (workspace.yaml's metadata.id does not)
    workspace_fixed: bool = False
    workspace_annotations: dict[str, str] = field(default_factory=dict)
    governance: dict[str, Any] = field(default_factory=dict)
    #: files a reader took in (a Swarm intent, an output schema): not "passed over"
    used_files: set[str] = field(default_factory=set)
    #: ${VAR:-default} expressions already reported (once each)
    expanded: set[str] = field(default_factory=set)
    #: Secret key → what to put there, when it is not simply the value of a variable
    secret_hints: dict[str, str] = field(default_factory=dict)
    #: Swarm model alias → "provider/model" (--model-alias), over upstream's built-ins
    model_aliases: dict[str, str] = field(default_factory=dict)
    descriptions: list[str] = field(default_factory=list)
    mcp_servers: list[Piece] = field(default_factory=list)
    tools: list[Piece] = field(default_factory=list)
    permission_bundles: list[Piece] = field(default_factory=list)
    credentials: list[Piece] = field(default_factory=list)
    model_providers: list[Piece] = field(default_factory=list)
    skills: list[Piece] = field(default_factory=list)
    #: archetypes become Agents; ``agents`` holds every Agent (archetypes included)
    agents: list[Piece] = field(default_factory=list)
    topologies: list[Piece] = field(default_factory=list)
    config_maps: list[Piece] = field(default_factory=list)
    #: Secret key → the first source place that needs it
    secret_keys: dict[str, Src] = field(default_factory=dict)

    def secret_ref(self, key: str, src: Src) -> dict[str, str]:
        """A reference to ``key`` of the generated Secret; records the key."""
        self.secret_keys.setdefault(key, src)
        return {"name": self.secret, "key": key}

    def env_value(self, fields: Fields, name: str, value: Any) -> dict[str, Any]:
        """An env entry ``{name, value | secretKeyRef}`` from a source value.

        ``${VAR}`` (or ``$VAR``) becomes a reference to key VAR of the generated Secret; a
        literal stays a literal, with a warning when the name looks like a secret. A value
        composed from variables (``${DIR}/data``, ``${MODE:-fast}``) keeps its meaning as the
        Secret key named after the entry, which the Secret template says how to fill (the
        runner does no expansion): a warning naming it, never the variable alone.
        """
        text = "" if value is None else str(value)
        found = list(_VAR.finditer(text))
        if (found or "${" in text) and not _VAR.fullmatch(text):
            # ${A}/suffix, ${VAR:-default}: expansion the runner does not do, so the deployer
            # puts the expanded value in the Secret, under the entry's own name
            fields.warn(
                name,
                f"{text!r} is composed from the environment; the runner does not expand "
                f"variables, so it is read from Secret {self.secret} key {name}: put the "
                "expanded value there (the Secret template says so)",
            )
            self.secret_hints[name] = f"the expansion of {text}"
            return {"name": name, "secretKeyRef": self.secret_ref(name, fields.src.at(name))}
        if not found:
            if _SECRET_LOOKING.search(name) and text:
                fields.warn(
                    name,
                    "literal value of a secret-looking variable is copied into the Workspace "
                    "in clear text; use ${VAR} to reference a Secret instead",
                )
            return {"name": name, "value": text}
        var = found[0].group(1) or found[0].group(2)
        return {"name": name, "secretKeyRef": self.secret_ref(var, fields.src.at(name))}

    def secret_var(self, value: Any) -> str | None:
        """``VAR`` when ``value`` is exactly ``${VAR}``/``$VAR``, else None."""
        m = _VAR.fullmatch(str(value)) if isinstance(value, str) else None
        return (m.group(1) or m.group(2)) if m else None


_ANNOTATION_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def annotation_key(prefix: str, name: str) -> str | None:
    """``prefix/name`` when ``name`` is a valid annotation name (the apiserver refuses an
    object with an invalid one), else None (the caller warns)."""
    return f"{prefix}/{name}" if _ANNOTATION_NAME.match(name) else None


def source_annotation(src: Src) -> dict[str, str]:
    return {SOURCE_ANNOTATION: f"{src.file}:{src.line}"}
