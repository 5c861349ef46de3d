"""swarmkit.dev/v1alpha1 API types: the single source of the CRDs and of the run bundle.

This package imports nothing from kopf, kubernetes or mcp: the operator, the runner and
the CRD generator all build on it.
"""

from .agent import AgentSpec, AgentStatus
from .base import ApiModel, CelRule
from .bundle import RunBundle, RunResult, secret_env_name
from .common import Condition, LocalObjectReference, SecretKeyRef
from .resources import (
    API_VERSION,
    GROUP,
    KINDS,
    KINDS_BY_NAME,
    VERSION,
    FieldError,
    KindInfo,
    ManifestError,
    validate_manifest,
    validate_spec,
)
from .run import RunSpec, RunStatus
from .skill import SkillSpec, SkillStatus
from .topology import TopologySpec, TopologyStatus
from .workspace import WorkspaceSpec, WorkspaceStatus

__all__ = [
    "API_VERSION",
    "GROUP",
    "KINDS",
    "KINDS_BY_NAME",
    "VERSION",
    "AgentSpec",
    "AgentStatus",
    "ApiModel",
    "CelRule",
    "Condition",
    "FieldError",
    "KindInfo",
    "LocalObjectReference",
    "ManifestError",
    "RunBundle",
    "RunResult",
    "RunSpec",
    "RunStatus",
    "SecretKeyRef",
    "SkillSpec",
    "SkillStatus",
    "TopologySpec",
    "TopologyStatus",
    "WorkspaceSpec",
    "WorkspaceStatus",
    "secret_env_name",
    "validate_manifest",
    "validate_spec",
]
