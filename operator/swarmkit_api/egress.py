"""Egress by declaration: where a Run's pod may connect, shared by operator and runner.

A Workspace's ``spec.egress`` chooses the policy (``declared``, the default, or ``none``)
and may add CIDRs and ports (``allow``). The destinations themselves come from what the
pinned bundle declares (:func:`.endpoints.declared_endpoints`): model providers, HTTP MCP
servers, HTTP tools, remote A2A agents and the web-search provider. The operator resolves
them into an :class:`EgressPlan` at render time (its NetworkPolicy is built from it) and
pins the plan in the Run's bundle; the runner checks every connection it makes against
the same plan after resolving the name itself (:func:`refusal`).

Link-local addresses (the cloud metadata endpoints) and the apiserver are :class:`Denied`:
never reachable unless named explicitly (an ``allow`` CIDR inside the denied range, or a
declared URL whose host is that very address).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field

from .base import ApiModel, CelRule

#: Never reachable unless named: IPv4 and IPv6 link-local (169.254.169.254, fd00:ec2::254
#: is not link-local but fe80::/10 covers the v6 metadata of most clouds' link-local form).
LINK_LOCAL = ("169.254.0.0/16", "fe80::/10")
#: The providers' default API base URLs (the runner's providers use the same; a unit test
#: keeps the two equal).
PROVIDER_DEFAULT_URLS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com",
}

EndpointKind = Literal["model", "mcp", "http-tool", "a2a", "search", "apiserver", "tracing"]
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return True


class EgressAllow(ApiModel):
    """An extra destination: a CIDR and (optionally) the ports open on it."""

    cel_rules = (
        CelRule(
            rule="isCIDR(self.cidr)",
            message="cidr must be an IPv4 or IPv6 CIDR such as 10.0.0.0/8",
            field_path=".cidr",
            check=lambda m: _is_cidr(m.cidr),
        ),
    )

    cidr: str = Field(max_length=64, description="IPv4 or IPv6 CIDR, e.g. 10.20.0.0/16.")
    ports: list[int] = Field(
        default_factory=list,
        max_length=32,
        description="Ports open on the CIDR; empty = every port of every protocol.",
    )
    protocol: Literal["TCP", "UDP"] = Field(
        default="TCP",
        description="Protocol of ports (UDP e.g. for a node-local DNS cache on port 53).",
    )
    description: str = Field(default="", max_length=256, description="Why it is allowed.")

    @property
    def network(self) -> IpNetwork:
        return ipaddress.ip_network(self.cidr, strict=False)

    def covers(self, address: IpAddress, port: int) -> bool:
        """Whether a TCP connection (the only kind the runner makes) to ``address:port``
        is allowed by this entry."""
        if self.ports and (self.protocol != "TCP" or port not in self.ports):
            return False
        return address in self.network


class EgressSpec(ApiModel):
    """Where Run, served-topology and gateway pods of the Workspace may connect."""

    cel_rules = (
        CelRule(
            rule="!has(self.policy) || self.policy != 'none' || "
            "!has(self.allow) || size(self.allow) == 0",
            message="allow has no effect with policy none",
            field_path=".allow",
            check=lambda m: m.policy != "none" or not m.allow,
        ),
    )

    policy: Literal["declared", "none"] = Field(
        default="declared",
        description="declared: a NetworkPolicy per pod allows DNS and the bundle's declared "
        "destinations only, and the runner checks every connection; none: neither (for "
        "clusters without a NetworkPolicy provider).",
    )
    allow: list[EgressAllow] = Field(
        default_factory=list, max_length=64, description="Extra CIDRs and ports."
    )


class Endpoint(ApiModel):
    """One declared destination, with the addresses its host resolved to at render time."""

    kind: EndpointKind = Field(description="What declares it.")
    name: str = Field(description="Who declares it (provider, server, tool or skill name).")
    host: str = Field(description="Host name or address, as declared.")
    port: int = Field(description="TCP port.")
    addresses: list[str] = Field(
        default_factory=list, description="CIDRs (/32, /128) the host resolved to."
    )


class Denied(ApiModel):
    """A range never reachable unless named explicitly (``port`` None: every port)."""

    cidr: str = Field(description="The range.")
    port: int | None = Field(default=None, description="Only this port (the apiserver's).")
    why: str = Field(description="What it is (shown in refusals).")

    def hits(self, address: IpAddress, port: int | None) -> bool:
        net = ipaddress.ip_network(self.cidr, strict=False)
        return address in net and (self.port is None or port is None or port == self.port)


class EgressPlan(ApiModel):
    """The resolved declaration: what the NetworkPolicy allows and the runner checks."""

    endpoints: list[Endpoint] = Field(default_factory=list, description="Declared ones.")
    allow: list[EgressAllow] = Field(default_factory=list, description="The Workspace's allow.")
    denied: list[Denied] = Field(default_factory=list, description="Never unless named.")
    unresolved: list[str] = Field(
        default_factory=list, description="host:port that did not resolve at render time."
    )


def url_endpoint(url: str) -> tuple[str, int] | None:
    """(host, port) of an http(s) URL; None when the host is a ``{placeholder}``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not host or "{" in host or "}" in host:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return host.lower(), port or (443 if parts.scheme == "https" else 80)


def provider_url(provider_type: str, base_url: str | None, region: str | None) -> str | None:
    """The URL a provider calls (its baseUrl, else the type's default; replay: none)."""
    if base_url:
        return base_url
    if provider_type == "bedrock" and region:
        return f"https://bedrock-runtime.{region}.amazonaws.com"
    return PROVIDER_DEFAULT_URLS.get(provider_type)


def _address(text: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%")[0])
    except ValueError:
        return None


def _named(plan: EgressPlan, address: IpAddress, port: int, denied: Denied) -> bool:
    """Whether ``address`` in a denied range is named explicitly: an allow CIDR inside the
    range that covers it, or a declared endpoint whose host is that very address."""
    if any(_address(e.host) == address and e.port == port for e in plan.endpoints):
        return True
    net = ipaddress.ip_network(denied.cidr, strict=False)
    return any(
        a.covers(address, port) and a.network.version == net.version and a.network.subnet_of(net)  # type: ignore[arg-type]
        for a in plan.allow
    )


def refusal(plan: EgressPlan, host: str, port: int, addresses: Sequence[str]) -> str | None:
    """Why connecting to ``host:port`` (resolved to ``addresses``) is refused; None if not.

    Every address must pass: a denied range refuses unless named explicitly; an ``allow``
    CIDR covering the address and port admits it; otherwise ``host:port`` must be declared
    and the address public, or one the host resolved to when the operator rendered the plan
    (so a declared name that now resolves to another private address is refused: no DNS
    rebinding into the cluster).
    """
    where = f"{host}:{port}"
    if not addresses:
        return f"egress to {where} refused: the name does not resolve"
    declared = [e for e in plan.endpoints if e.host == host.lower() and e.port == port]
    known = {
        ipaddress.ip_network(a, strict=False) for e in declared for a in e.addresses if _is_cidr(a)
    }
    for text in addresses:
        address = _address(text)
        if address is None:
            return f"egress to {where} refused: {text!r} is not an IP address"
        hit = next((d for d in plan.denied if d.hits(address, port)), None)
        if hit is not None:
            if _named(plan, address, port, hit):
                continue
            return (
                f"egress to {where} refused: it resolves to {address}, {hit.why} "
                f"({hit.cidr}), never reachable unless named explicitly in egress.allow"
            )
        if any(a.covers(address, port) for a in plan.allow):
            continue
        if not declared:
            return (
                f"egress to {where} refused: not a declared destination of this Workspace "
                f"(model provider, HTTP MCP server, HTTP tool, A2A agent, search provider) "
                f"and {address} is not in egress.allow"
            )
        if address.is_global or any(address in n for n in known):
            continue
        return (
            f"egress to {where} refused: it resolves to {address}, a non-public address it "
            f"did not resolve to when the Run was rendered and not in egress.allow"
        )
    return None


def link_local_denied() -> list[Denied]:
    return [Denied(cidr=c, why="a link-local address (cloud metadata)") for c in LINK_LOCAL]


__all__ = [
    "LINK_LOCAL",
    "PROVIDER_DEFAULT_URLS",
    "Denied",
    "EgressAllow",
    "EgressPlan",
    "EgressSpec",
    "Endpoint",
    "link_local_denied",
    "provider_url",
    "refusal",
    "url_endpoint",
]
