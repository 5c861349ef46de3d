"""The real node's pure builders (issue 38): the cluster DNS is the one the kubelet names and the
one the operator's NetworkPolicies admit; what pins a namespace to the node; image archives
keyed so that a change is never served from a stale cache."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from swarmkit_devcluster import realnode as rn
from swarmkit_devcluster import realnode_dns as dns
from swarmkit_devcluster import realnode_images as img
from swarmkit_operator.builders.netpol import DNS_PEER, DNS_PORTS


def _objects() -> dict[str, dict]:  # type: ignore[type-arg]
    return {obj["kind"]: obj for _, obj in dns.dns_objects()}


def test_the_dns_service_is_the_kubelets_cluster_dns() -> None:
    cfg = json.loads(rn.kubelet_config(rn.NodePaths(), Path("ca"), Path("c"), Path("k"), Path("r")))
    service = _objects()["Service"]
    assert cfg["clusterDNS"] == [service["spec"]["clusterIP"]] == [rn.DNS_IP]
    assert cfg["clusterDomain"] == "cluster.local" and "cluster.local" in dns.COREFILE
    assert {(p["protocol"], p["port"]) for p in service["spec"]["ports"]} == {
        ("UDP", 53),
        ("TCP", 53),
    }


def test_the_operators_policies_admit_the_dns_pods() -> None:
    """Every Run/serve/gateway policy allows egress to DNS_PEER on DNS_PORTS: the CoreDNS pods
    must be what that peer selects, listening on those ports (after the Service's DNAT)."""
    deployment = _objects()["Deployment"]
    ns = DNS_PEER["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
    assert deployment["metadata"]["namespace"] == ns
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert DNS_PEER["podSelector"]["matchLabels"].items() <= labels.items()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {(p["protocol"], p["containerPort"]) for p in container["ports"]}
    assert ports == {(p["protocol"], p["port"]) for p in DNS_PORTS}
    assert "forward" not in dns.COREFILE  # nothing leaves the machine


def test_the_dns_pod_is_restricted_and_pinned_to_the_real_node() -> None:
    spec = _objects()["Deployment"]["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": rn.NODE_NAME}
    assert spec["tolerations"][0]["key"] == rn.TAINT_KEY
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = spec["containers"][0]["securityContext"]
    assert sc == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def test_namespace_annotations_pin_every_pod_to_the_real_node() -> None:
    notes = rn.namespace_annotations()
    selector = notes["scheduler.alpha.kubernetes.io/node-selector"]
    assert selector == f"kubernetes.io/hostname={rn.NODE_NAME}"
    (toleration,) = json.loads(notes["scheduler.alpha.kubernetes.io/defaultTolerations"])
    assert toleration == {"key": rn.TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}


def test_the_busybox_archive_name_changes_with_its_applets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = img.busybox_path(Path("/c"))
    monkeypatch.setattr(img, "_APPLETS", (*img._APPLETS, "wget"))
    assert img.busybox_path(Path("/c")) != before


def _demo_commands(env: dict[str, str]) -> list[str]:
    """What `make demo` would run (``make -n``: nothing runs, the sub-make is listed too)."""
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", "demo"],
        cwd=repo,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in out.splitlines() if "swarmkit_devcluster" in line]


@pytest.mark.skipif(os.geteuid() != 0, reason="the real node is chosen for root")
def test_make_demo_as_root_runs_its_run_on_the_real_node() -> None:
    """As root, `make demo` builds the real node and its images and starts the cluster with it;
    `REAL_NODE=0` keeps the process node: no node build, no image import, no lock."""
    real = _demo_commands({"REAL_NODE": ""})  # empty: as if unset
    assert any(c.endswith("swarmkit_devcluster build --node") for c in real), real
    assert any(c.endswith("swarmkit_devcluster images") for c in real), real
    assert real[-1].startswith("REAL_NODE=1 ") and real[-1].endswith("swarmkit_devcluster demo")
    process = _demo_commands({"REAL_NODE": "0"})
    assert not any("build --node" in c or c.endswith(" images") for c in process), process
    assert process[-1].startswith("REAL_NODE=0 ")


@pytest.mark.parametrize("real_node", ["", "0"])
def test_make_demo_installs_nothing_of_the_test_tool_chain(real_node: str) -> None:
    """A newcomer's first command (issue 38 item 6): on a clone without a venv (``VENV`` a
    directory that does not exist), `make demo` installs the run extras only, never the
    test/dev/docs extras, Chromium, botocore or checkov. Measured cold, `images` still asked
    for the whole test venv once the real node made the demo build images."""
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", "VENV=/nonexistent/venv", "demo"],
        cwd=repo,
        env={**os.environ, "REAL_NODE": real_node},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "pip install" in out, out  # the venv is made in this dry run
    for tool_chain in ("test,dev,docs", "chromium", "botocore", "checkov"):
        assert tool_chain not in out, (tool_chain, out)


def test_the_saved_sysctls_outlive_the_state_tmpfs() -> None:
    """The node's state is a tmpfs that teardown unmounts before it restores the sysctls the
    kubelet rewrote: the saved values must not live on it."""
    p = rn.NodePaths()
    assert not p.sysctl_file.is_relative_to(p.root)
    assert p.sysctl_file.is_relative_to(p.run)


def test_cluster_down_says_where_its_time_went() -> None:
    from swarmkit_devcluster.laps import Laps

    laps = Laps()
    laps.parts += [("kube-apiserver", 5.04), ("mounts", 0.01), ("host directories", 0.12)]
    assert laps.line() == "kube-apiserver 5.0s, host directories 0.1s"
    assert round(laps.total(), 2) == 5.17
