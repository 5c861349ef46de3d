"""The NetworkPolicy builder: every declared destination kind, explicit allows, ``none``,
and the ranges (link-local, the apiserver) that are never opened unless named."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from swarmkit_api.egress import EgressSpec, Endpoint
from swarmkit_api.endpoints import declared_endpoints
from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator.builders import netpol
from tests.support import bundles as b

DNS = {
    "mail.example.com": ["203.0.113.10", "203.0.113.11", "2001:db8::10"],
    "api.anthropic.com": ["160.79.104.10"],
    "mcp.internal": ["10.96.0.20"],
    "agents.partner.example": ["198.51.100.7"],
    "search.example": ["198.51.100.8"],
    "sneaky.example": ["169.254.169.254"],
    "bedrock-runtime.eu-west-1.amazonaws.com": ["52.94.1.1"],
}


def resolve(host: str) -> Sequence[str]:
    if host.replace(".", "").isdigit() or ":" in host:
        return [host]  # a literal address resolves to itself, as getaddrinfo does
    return DNS.get(host, [])


def full_bundle(egress: dict[str, Any] | None = None) -> Any:
    remote = b.skill(
        "partner",
        implementation={"type": "agent", "cardUrl": "https://agents.partner.example/card.json"},
    )
    workspace: dict[str, Any] = {
        "searchProvider": {"url": "https://search.example/q"},
        "modelProviders": [
            {"name": "claude", "type": "anthropic"},
            {"name": "bed", "type": "bedrock", "aws": {"region": "eu-west-1"}},
            {"name": "local", "type": "openai", "baseUrl": "http://10.0.0.5:8000/v1"},
            {"name": "replayed", "type": "replay"},
        ],
    }
    if egress is not None:
        workspace["egress"] = egress
    return b.bundle(
        agents=[b.agent("a")],
        skills=[remote],
        mcp_servers=[
            b.http_server("pg", "http://mcp.internal:8080/mcp"),
            b.stdio_server("fs", ["mcp-fs"]),
        ],
        tools=[
            b.http_tool("mail", "https://mail.example.com/send"),
            b.http_tool("dyn", "https://{tenant}.example.com/x"),
        ],
        workspace=workspace,
    )


def policy(bundle: Any, **kw: Any) -> dict[str, Any]:
    p = netpol.plan(bundle, bundle.workspace.egress, resolve, **kw)
    assert p is not None
    return netpol.build_network_policy(
        name="run-x",
        namespace="ns",
        owner={"apiVersion": "swarmkit.dev/v1alpha1", "kind": "Run", "name": "x", "uid": "u"},
        pod_selector={"swarmkit.dev/run-uid": "u"},
        labels={"swarmkit.dev/run": "x"},
        egress_plan=p,
    )


def by_port(doc: dict[str, Any]) -> dict[int, set[str]]:
    """TCP port → the ipBlock CIDRs opened on it (rules with ports only)."""
    out: dict[int, set[str]] = {}
    for rule in doc["spec"]["egress"][1:]:
        for port in rule.get("ports", []):
            for peer in rule["to"]:
                out.setdefault(port["port"], set()).add(peer["ipBlock"]["cidr"])
    return out


def test_every_declared_destination_kind_is_opened_on_its_port() -> None:
    doc = policy(full_bundle())
    assert doc["spec"]["podSelector"] == {"matchLabels": {"swarmkit.dev/run-uid": "u"}}
    assert doc["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert doc["spec"]["ingress"] == []  # a Run's pod takes no connections
    assert doc["metadata"]["ownerReferences"][0]["kind"] == "Run"
    dns = doc["spec"]["egress"][0]
    assert dns["to"] == [netpol.DNS_PEER]
    assert {p["port"] for p in dns["ports"]} == {53}
    ports = by_port(doc)
    assert ports[443] == {
        "160.79.104.10/32",  # model: anthropic's default URL
        "52.94.1.1/32",  # model: bedrock's regional endpoint
        "198.51.100.7/32",  # a2a: the remote agent's card host
        "198.51.100.8/32",  # the web-search provider
        "203.0.113.10/32",  # an HTTP tool, a host with three addresses
        "203.0.113.11/32",
        "2001:db8::10/128",
    }
    assert ports[8080] == {"10.96.0.20/32"}  # the HTTP MCP server
    assert ports[8000] == {"10.0.0.5/32"}  # a literal address, its own port
    assert set(ports) == {443, 8080, 8000}  # stdio MCP, replay and a {host} tool open nothing


def test_declared_endpoints_name_kind_and_declarer() -> None:
    bundle = full_bundle()
    found = {
        (e.kind, e.name, e.host, e.port)
        for e in declared_endpoints(bundle.workspace, [("partner", bundle.skills["partner"].spec)])
    }
    assert ("mcp", "pg", "mcp.internal", 8080) in found
    assert ("a2a", "partner", "agents.partner.example", 443) in found
    assert ("http-tool", "mail", "mail.example.com", 443) in found
    assert ("search", "web_search", "search.example", 443) in found
    assert not any(name == "dyn" for _, name, _, _ in found)


def test_allow_adds_cidrs_and_ports_and_cuts_out_link_local() -> None:
    doc = policy(
        full_bundle({"allow": [{"cidr": "10.20.0.0/16", "ports": [5432]}, {"cidr": "0.0.0.0/0"}]})
    )
    rules = doc["spec"]["egress"][1:]  # after the DNS rule
    narrow = next(r for r in rules if r["to"][0]["ipBlock"]["cidr"] == "10.20.0.0/16")
    assert narrow["ports"] == [{"protocol": "TCP", "port": 5432}]
    assert "except" not in narrow["to"][0]["ipBlock"]
    wide = next(r for r in rules if r["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0")
    assert "ports" not in wide
    assert wide["to"][0]["ipBlock"]["except"] == ["169.254.0.0/16"]


def test_a_udp_allow_opens_udp_only() -> None:
    doc = policy(
        full_bundle({"allow": [{"cidr": "169.254.20.10/32", "ports": [53], "protocol": "UDP"}]})
    )
    rule = next(r for r in doc["spec"]["egress"][1:] if "169.254.20.10/32" in str(r["to"]))
    assert rule["ports"] == [{"protocol": "UDP", "port": 53}]
    udp = full_bundle({"allow": [{"cidr": "10.0.0.0/8", "ports": [53], "protocol": "UDP"}]})
    p = netpol.plan(udp, udp.workspace.egress, resolve)
    # the runner makes TCP connections only: a UDP entry admits none of them
    assert p is not None and not p.allow[0].covers(ipaddress.ip_address("10.1.2.3"), 53)


def test_link_local_opens_only_when_named() -> None:
    named = policy(full_bundle({"allow": [{"cidr": "169.254.169.254/32", "ports": [80]}]}))
    rule = next(
        r
        for r in named["spec"]["egress"][1:]
        if r.get("ports") == [{"protocol": "TCP", "port": 80}]
    )
    assert rule["to"] == [{"ipBlock": {"cidr": "169.254.169.254/32"}}]
    # a declared host that resolves into link-local gets no rule
    bundle = b.bundle(agents=[b.agent("a")], tools=[b.http_tool("t", "http://sneaky.example/")])
    assert by_port(policy(bundle)) == {}
    p = netpol.plan(bundle, None, resolve)
    assert p is not None and p.endpoints[0].addresses == ["169.254.169.254/32"]


def test_apiserver_is_never_opened_unless_named() -> None:
    api = [("10.0.0.1", 6443)]
    bundle = b.bundle(
        agents=[b.agent("a")],
        tools=[b.http_tool("t", "http://10.0.0.1:6443/")],  # named: the literal address
        workspace={
            "egress": {"allow": [{"cidr": "10.0.0.0/8"}, {"cidr": "10.0.0.0/24", "ports": [80]}]}
        },
    )
    doc = policy(bundle, apiserver=api)
    blocks = {r["to"][0]["ipBlock"]["cidr"]: r for r in doc["spec"]["egress"][1:]}
    assert blocks["10.0.0.0/8"]["to"][0]["ipBlock"]["except"] == ["10.0.0.1/32"]
    assert "except" not in blocks["10.0.0.0/24"]["to"][0]["ipBlock"]  # port 80 only
    assert by_port(doc)[6443] == {"10.0.0.1/32"}  # the tool named the address itself
    # a name that merely resolves to the apiserver is not naming it
    DNS["kube.example"] = ["10.0.0.1"]
    hidden = b.bundle(agents=[b.agent("a")], tools=[b.http_tool("t", "http://kube.example:6443/")])
    assert 6443 not in by_port(policy(hidden, apiserver=api))


def test_policy_none_renders_nothing_and_rejects_allow() -> None:
    bundle = full_bundle({"policy": "none"})
    assert netpol.plan(bundle, bundle.workspace.egress, resolve) is None
    with pytest.raises(ValidationError, match="allow has no effect with policy none"):
        EgressSpec.model_validate({"policy": "none", "allow": [{"cidr": "10.0.0.0/8"}]})
    with pytest.raises(ValidationError, match="cidr must be an IPv4 or IPv6 CIDR"):
        WorkspaceSpec.model_validate({"egress": {"allow": [{"cidr": "10.0.0.0/33"}]}})


def test_unresolved_hosts_are_reported_and_get_no_rule() -> None:
    bundle = b.bundle(agents=[b.agent("a")], tools=[b.http_tool("t", "https://nowhere.invalid/")])
    p = netpol.plan(bundle, None, resolve)
    assert p is not None and p.unresolved == ["nowhere.invalid:443"]
    assert by_port(policy(bundle)) == {}


def test_serve_and_gateway_pods_take_only_their_port() -> None:
    p = netpol.plan(full_bundle(), None, resolve)
    assert p is not None
    doc = netpol.build_network_policy(
        name="serve-t",
        namespace="ns",
        owner={"kind": "Topology"},
        pod_selector={"swarmkit.dev/serve": "t"},
        labels={},
        egress_plan=p,
        ingress_ports=[8080],
    )
    assert doc["spec"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": 8080}]}]


def test_extra_endpoints_are_opened() -> None:
    extra = [Endpoint(kind="apiserver", name="kubernetes", host="10.0.0.1", port=6443)]
    p = netpol.plan(full_bundle(), None, resolve, apiserver=[("10.0.0.1", 6443)], extra=extra)
    assert p is not None
    doc = netpol.build_network_policy(
        name="g", namespace="ns", owner={}, pod_selector={}, labels={}, egress_plan=p
    )
    assert by_port(doc)[6443] == {"10.0.0.1/32"}
