"""The destinations a Workspace and its skills declare (the egress plan's endpoints).

Apart from :mod:`.egress` because it reads the Workspace and Skill models, and
:mod:`.workspace` embeds :class:`~.egress.EgressSpec`: the plan's own types stay free of
the kinds that use them (no import cycle).
"""

from __future__ import annotations

from collections.abc import Iterable

from .egress import Endpoint, EndpointKind, provider_url, url_endpoint
from .skill import SkillSpec
from .workspace import WorkspaceSpec


def declared_endpoints(
    workspace: WorkspaceSpec, skills: Iterable[tuple[str, SkillSpec]]
) -> list[Endpoint]:
    """Every destination the bundle declares (sorted, without duplicates).

    An HTTP tool whose URL puts a placeholder in the host declares nothing: its host is
    only known at call time, so it must be reached through ``egress.allow``.
    """
    urls: list[tuple[EndpointKind, str, str | None]] = []
    for p in workspace.model_providers:
        region = p.aws.region if p.aws else None
        urls.append(("model", p.name, provider_url(p.type, p.base_url, region)))
    urls += [("mcp", s.id, s.url) for s in workspace.mcp_servers if s.transport == "http"]
    urls += [("http-tool", t.name, t.http.url if t.http else None) for t in workspace.tools]
    if workspace.search_provider is not None:
        urls.append(("search", "web_search", workspace.search_provider.url))
    if workspace.tracing is not None:
        urls.append(("tracing", "otlp", workspace.tracing.endpoint))
    for name, spec in skills:
        impl = spec.implementation
        if impl is not None and impl.type == "agent" and impl.card_url:
            urls.append(("a2a", name, impl.card_url))
    out: dict[tuple[str, str, int], Endpoint] = {}
    for kind, name, url in urls:
        found = url_endpoint(url) if url else None
        if found is not None:
            endpoint = Endpoint(kind=kind, name=name, host=found[0], port=found[1])
            out.setdefault((found[0], name, found[1]), endpoint)
    return [out[k] for k in sorted(out)]


__all__ = ["declared_endpoints"]
