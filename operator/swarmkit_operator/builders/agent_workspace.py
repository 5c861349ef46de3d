"""An Agent checked against its Workspace: the references that must resolve there.

Every problem is a ``(reason, message)`` pair the Agent's ``Accepted=False`` condition
reports (permission bundle, tools, MCP prefixes, native tools, model provider and model
settings, flow data); ``effective_permissions`` is the permission list the runner enforces.
"""

from __future__ import annotations

from swarmkit_api import model_rules
from swarmkit_api.agent import AgentSpec
from swarmkit_api.conditions import (
    REASON_NATIVE_TOOL_UNAVAILABLE,
    REASON_UNKNOWN_FLOW_DATA,
    REASON_UNKNOWN_MODEL_PROVIDER,
    REASON_UNKNOWN_PERMISSION_BUNDLE,
    REASON_UNKNOWN_TOOL,
    REASON_UNSUPPORTED_MODEL_SETTING,
)
from swarmkit_api.workspace import PLATFORM_BUILTINS, WorkspaceSpec


def workspace_problems(spec: AgentSpec, workspace: WorkspaceSpec) -> list[tuple[str, str]]:
    """References to the Workspace that do not resolve (each is an Accepted=False reason)."""
    problems: list[tuple[str, str]] = []
    bundles = {b.name for b in workspace.permission_bundles}
    if spec.permissions_bundle is not None and spec.permissions_bundle not in bundles:
        problems.append(
            (
                REASON_UNKNOWN_PERMISSION_BUNDLE,
                f"spec.permissionsBundle: no permission bundle {spec.permissions_bundle!r} in "
                f"the workspace (known: {', '.join(sorted(bundles)) or 'none'})",
            )
        )
    tool_names = {t.name for t in workspace.tools} | set(PLATFORM_BUILTINS)
    prefixes = {s.tool_prefix for s in workspace.mcp_servers}
    for i, tool in enumerate(spec.tools):
        prefix, dot, rest = tool.partition(".")
        if tool in tool_names or (dot and rest and prefix in prefixes):
            continue
        hint = (
            f"no MCP server with prefix {prefix!r}"
            if dot
            else "not a workspace tool, platform builtin or <prefix>.<tool>"
        )
        problems.append((REASON_UNKNOWN_TOOL, f"spec.tools[{i}]: unknown tool {tool!r} ({hint})"))
    native = spec.native_tools
    if native is not None and native.web_search and workspace.search_provider is None:
        problems.append(
            (
                REASON_NATIVE_TOOL_UNAVAILABLE,
                "spec.nativeTools.webSearch: the runtime cannot provide web_search: the "
                "workspace declares no searchProvider",
            )
        )
    providers = [p.name for p in workspace.model_providers]
    if spec.model is not None and spec.model.provider is not None:
        if spec.model.provider not in providers:
            problems.append(
                (
                    REASON_UNKNOWN_MODEL_PROVIDER,
                    f"spec.model.provider: no model provider {spec.model.provider!r} in the "
                    f"workspace (known: {', '.join(providers) or 'none'})",
                )
            )
    elif not providers:
        problems.append(
            (REASON_UNKNOWN_MODEL_PROVIDER, "the workspace declares no model providers to run with")
        )
    problems += model_problems(spec, workspace)
    flow = {f.path for f in workspace.flow_data}
    for i, path in enumerate(spec.flow_data_access):
        if path not in flow:
            problems.append(
                (
                    REASON_UNKNOWN_FLOW_DATA,
                    f"spec.flowDataAccess[{i}]: the workspace has no flow data file {path!r}",
                )
            )
    return problems


def model_problems(spec: AgentSpec, workspace: WorkspaceSpec) -> list[tuple[str, str]]:
    """Model settings the agent's provider would refuse (``swarmkit_api.model_rules``)."""
    wanted = spec.model.provider if spec.model is not None else None
    provider = next((p for p in workspace.model_providers if wanted in (None, p.name)), None)
    if provider is None or spec.model is None:
        return []
    model = spec.model.name or provider.default_model
    problem = model_rules.temperature_problem(provider.type, model, spec.model.temperature)
    return (
        [(REASON_UNSUPPORTED_MODEL_SETTING, f"spec.model.temperature: {problem}")]
        if problem
        else []
    )


def effective_permissions(spec: AgentSpec, workspace: WorkspaceSpec) -> list[str]:
    """The bundle's permissions plus the inline ones, deduplicated, in order."""
    perms: list[str] = []
    bundle = next(
        (b for b in workspace.permission_bundles if b.name == spec.permissions_bundle), None
    )
    for perm in [*(bundle.permissions if bundle else []), *spec.permissions]:
        if perm not in perms:
            perms.append(perm)
    return perms
