"""The real node (issue 38): containerd + runc + a CNI bridge + kubelet + kube-proxy + kube-router
(firewall only) beside the process node, started by ``LocalCluster`` when ``REAL_NODE=1``.

Host-level and root only. The kubelet and containerd use fixed host paths, so there is one real
node per machine: :func:`acquire_machine_lock` queues a second cluster until the first is down.
Everything it changes on the host (the bridge, iptables/ipset rules, mounts, cgroups, sysctls,
the directories under :data:`HOST_ROOT`) is undone by :func:`teardown`, which is also safe to
run when nothing was set up. Config writers are pure functions; :func:`host_setup` and
:func:`teardown` are the only functions that touch the host.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from swarmkit_devcluster.laps import Laps
from swarmkit_devcluster.paths import binary

NODE_NAME = "realnode"
BRIDGE = "skrn0"
BRIDGE_IP = "10.244.1.1"
POD_CIDR = "10.244.1.0/24"
CLUSTER_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.0.0.0/24"
DNS_IP = "10.0.0.10"
TAINT_KEY = "swarmkit.dev/real-node"
HOST_ROOT = Path("/var/lib/swarmkit-realnode")
RUN_ROOT = Path("/run/swarmkit-realnode")
LOCK_PATH = Path("/run/swarmkit-realnode.lock")
GUARD_CHAIN = "SWARMKIT-RN-GUARD"
API_CHAIN = "SWARMKIT-RN-API"
# Host-wide sysctls the kubelet / the bridge plugin rewrite: saved before, restored at teardown.
SYSCTLS = ("vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops", "net.ipv4.ip_forward")
# Fixed host paths the kubelet, containerd and libcni use whatever their configured roots are.
FIXED_PATHS = (
    Path("/var/lib/kubelet/device-plugins"),
    Path("/var/log/containers"),
    Path("/var/log/pods"),
    Path("/var/lib/cni"),
    Path("/run/containerd"),
)
# What the kernel must offer, as files that show it (built in or loaded; no modprobe here).
KERNEL_FEATURES = {
    "/sys/module/overlay": "overlayfs (the containerd snapshotter)",
    "/sys/module/bridge": "the Linux bridge (the pod network)",
    "/proc/sys/net/bridge/bridge-nf-call-iptables": "bridge netfilter (policies on the bridge)",
}


class RealNodeError(RuntimeError):
    """The real node cannot start; the message names the missing feature or the failure."""


@dataclass(frozen=True)
class NodePaths:
    """Every file the real node writes: under the fixed host roots."""

    root: Path = HOST_ROOT
    run: Path = RUN_ROOT

    @property
    def containerd_sock(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def cni_conf(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_bin(self) -> Path:
        return self.root / "cni" / "bin"

    @property
    def sysctl_file(self) -> Path:
        # Under run, not root: root is a tmpfs unmounted before the sysctls are restored.
        return self.run / "sysctls.json"


def containerd_config(p: NodePaths) -> str:
    """containerd 2.x config (version 3). ``restrict_oom_score_adj``: root on this kind of VM
    lacks CAP_SYS_RESOURCE, so runc cannot lower oom_score_adj (the sandbox fails otherwise)."""
    runc = binary("runc")
    return f"""version = 3
root = '{p.root / "containerd"}'
state = '{p.run / "containerd"}'
[grpc]
  address = '{p.containerd_sock}'
[ttrpc]
  address = '{p.containerd_sock}.ttrpc'
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  pinned_images.sandbox = 'registry.k8s.io/pause:3.10.1'
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  containerd.default_runtime_name = 'runc'
  containerd.runtimes.runc.runtime_type = 'io.containerd.runc.v2'
  containerd.runtimes.runc.options = {{ BinaryName = '{runc}', SystemdCgroup = false }}
  cni = {{ bin_dirs = ['{p.cni_bin}'], conf_dir = '{p.cni_conf}', max_conf_num = 1 }}
[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = '127.0.0.1'
"""


def cni_config() -> str:
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "swarmkit-realnode",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR, "rangeStart": "10.244.1.10"}]],
                        "routes": [{"dst": "0.0.0.0/0", "gw": BRIDGE_IP}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=1,
    )


def kubelet_config(p: NodePaths, ca: Path, crt: Path, key: Path, resolv: Path) -> str:
    """KubeletConfiguration: x509 client auth against the cluster CA, no anonymous access,
    Webhook authorization; its port only on the bridge address."""
    cfg = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{p.containerd_sock}",
        "address": BRIDGE_IP,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(crt),
        "tlsPrivateKeyFile": str(key),
        "resolvConf": str(resolv),
        "clusterDNS": [DNS_IP],
        "clusterDomain": "cluster.local",
        "failSwapOn": False,
        "podLogsDir": str(p.root / "pod-logs"),
        "volumePluginDir": str(p.root / "volume-plugins"),
        "evictionHard": {
            "memory.available": "200Mi",
            "nodefs.available": "2%",
            "imagefs.available": "2%",
            "nodefs.inodesFree": "2%",
        },
        "imageGCHighThresholdPercent": 99,
        "imageGCLowThresholdPercent": 98,
        "registerWithTaints": [{"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}],
    }
    return json.dumps(cfg, indent=1)


def kube_proxy_config(kubeconfig: Path) -> str:
    """iptables mode, NodePorts only on the bridge address, the host's conntrack and
    route_localnet sysctls left alone."""
    cfg = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": NODE_NAME,
        "clusterCIDR": CLUSTER_CIDR,
        "detectLocalMode": "ClusterCIDR",
        "nodePortAddresses": [f"{BRIDGE_IP}/32"],
        "iptables": {"localhostNodePorts": False},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
    }
    return json.dumps(cfg, indent=1)


def guard_rules() -> list[list[str]]:
    """The leak guard (iptables argument lists, applied in order). In the raw table, so it sees
    the destination before any DNAT or any rule kube-proxy/kube-router insert: from the bridge,
    only the pod range and the service range (which includes the bridge address) pass."""
    return [
        ["-t", "raw", "-N", GUARD_CHAIN],
        ["-t", "raw", "-A", GUARD_CHAIN, "-d", POD_CIDR, "-j", "RETURN"],
        ["-t", "raw", "-A", GUARD_CHAIN, "-d", SERVICE_CIDR, "-j", "RETURN"],
        ["-t", "raw", "-A", GUARD_CHAIN, "-j", "DROP"],
        ["-t", "raw", "-I", "PREROUTING", "-i", BRIDGE, "-j", GUARD_CHAIN],
        ["-t", "mangle", "-N", GUARD_CHAIN],
        ["-t", "mangle", "-A", GUARD_CHAIN, "-o", BRIDGE, "-j", "RETURN"],
        ["-t", "mangle", "-A", GUARD_CHAIN, "-s", CLUSTER_CIDR, "-j", "DROP"],
        ["-t", "mangle", "-A", GUARD_CHAIN, "-i", BRIDGE, "-j", "DROP"],
        ["-t", "mangle", "-I", "FORWARD", "-j", GUARD_CHAIN],
    ]


def api_rules(port: int) -> list[list[str]]:
    """The apiserver listens on every address (pods reach it on the bridge address); only
    loopback and the bridge may connect."""
    return [
        ["-N", API_CHAIN],
        ["-A", API_CHAIN, "-i", "lo", "-j", "RETURN"],
        ["-A", API_CHAIN, "-i", BRIDGE, "-j", "RETURN"],
        ["-A", API_CHAIN, "-j", "DROP"],
        ["-I", "INPUT", "-p", "tcp", "--dport", str(port), "-j", API_CHAIN],
    ]


# -- the host ------------------------------------------------------------------------------


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if check and res.returncode != 0:
        raise RealNodeError(f"`{' '.join(cmd)}` failed: {res.stderr.strip()}")
    return res


def check_host() -> None:
    """Root, the apt tools and the kernel features; a clear message naming what is missing."""
    if os.geteuid() != 0:
        raise RealNodeError("the real node needs root (REAL_NODE=1); run as root or unset it")
    for tool in ("iptables", "ip6tables", "ipset", "conntrack", "ip", "gcc"):
        if shutil.which(tool) is None:
            raise RealNodeError(f"`{tool}` is missing: run `make node-binaries` (installs it)")
    for path, what in KERNEL_FEATURES.items():
        if not Path(path).exists():
            raise RealNodeError(f"the kernel lacks {what} ({path} is missing)")


def acquire_machine_lock(say: object = print) -> int:
    """Block until this machine's real node is free (another worktree's cluster holds it until
    its ``make cluster-down``); returns the locked fd to hand to the lock-holder process."""
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        if callable(say):
            say(f"waiting for the machine's real node (held by {owner or 'another cluster'})")
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def host_setup(p: NodePaths) -> None:
    """The bridge, the leak guard and the saved sysctls; idempotent after :func:`teardown`."""
    _mount_state_tmpfs(p.root)
    for d in (p.root, p.run, p.cni_conf, p.cni_bin, p.root / "pod-logs"):
        d.mkdir(parents=True, exist_ok=True)
    if not p.sysctl_file.exists():
        saved = {k: _run("sysctl", "-n", k).stdout.strip() for k in SYSCTLS}
        p.sysctl_file.write_text(json.dumps(saved))
    if _run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
    _run("sysctl", "-qw", f"net.ipv6.conf.{BRIDGE}.disable_ipv6=1", check=False)
    _run("ip", "addr", "replace", f"{BRIDGE_IP}/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    # A service IP without a DNAT rule stays on the bridge instead of the default route.
    _run("ip", "route", "replace", SERVICE_CIDR, "dev", BRIDGE)
    _run("sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1")
    for rule in guard_rules():
        _run("iptables", *rule)
    _run("ip6tables", "-t", "raw", "-I", "PREROUTING", "-i", BRIDGE, "-j", "DROP")
    for name in ("loopback", "bridge", "host-local", "portmap"):
        target = p.cni_bin / name
        if not target.exists():
            target.symlink_to(binary(name))
    (p.cni_conf / "10-swarmkit.conflist").write_text(cni_config())


#: The tmpfs under the node's state (containerd's content store and snapshots, pod logs):
#: about 1 GB with the five images imported, a quarter of it the runtime image unpacked.
STATE_TMPFS_SIZE = "6g"


def _mount_state_tmpfs(root: Path) -> None:
    """The node's state on a tmpfs: teardown unmounts it at once, where deleting the
    unpacked images file by file took 45 s (measured: `make cluster-down` after `make demo`,
    load 2-3), and nothing of it can outlive the machine."""
    root.mkdir(parents=True, exist_ok=True)
    mounts = [ln.split()[1] for ln in Path("/proc/self/mounts").read_text().splitlines()]
    if str(root) not in mounts:
        _run(
            "mount",
            "-t",
            "tmpfs",
            "-o",
            f"size={STATE_TMPFS_SIZE},mode=0755",
            "swarmkit-realnode",
            str(root),
        )


def _delete_rules(table: str, chain: str, target: str, tool: str = "iptables") -> None:
    """Delete every rule in ``chain`` that jumps to ``target``, by number, last first."""
    res = _run(tool, "-t", table, "-L", chain, "--line-numbers", "-n", check=False)
    nums = [ln.split()[0] for ln in res.stdout.splitlines()[2:] if f" {target} " in f" {ln} "]
    for n in reversed(nums):
        _run(tool, "-t", table, "-D", chain, n, check=False)


def _kill_cgroup_tree() -> None:
    """Kill every process left in the pods' cgroups (all v1 hierarchies and cgroup2), then
    remove those cgroups, leaves first."""
    roots = [Path(m) / "kubepods" for m in Path("/sys/fs/cgroup").glob("*")]
    roots += [Path("/sys/fs/cgroup/unified/kubepods")]
    for root in roots:
        if not root.is_dir():
            continue
        for procs in root.rglob("cgroup.procs"):
            for pid in procs.read_text().split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
    time.sleep(0.3)
    for root in roots:
        if not root.is_dir():
            continue
        for d in sorted((x for x in root.rglob("*") if x.is_dir()), key=lambda x: -len(x.parts)):
            with contextlib.suppress(OSError):
                d.rmdir()
        with contextlib.suppress(OSError):
            root.rmdir()


def _unmount_under(*prefixes: Path) -> None:
    mounts = [ln.split()[1] for ln in Path("/proc/self/mounts").read_text().splitlines()]
    for m in sorted(mounts, key=len, reverse=True):
        if any(m.startswith(str(pfx)) for pfx in prefixes):
            _run("umount", "-l", m, check=False)


def teardown(p: NodePaths, api_port: int | None = None, laps: Laps | None = None) -> None:
    """Undo everything :func:`host_setup` and the node's components did. The components are
    stopped by the cluster before this runs; safe to repeat. ``laps``: the time per part."""
    laps = laps if laps is not None else Laps()
    _kill_cgroup_tree()
    laps.lap("pod cgroups")
    for netns in Path("/run/netns").glob("cni-*"):
        _run("ip", "netns", "delete", netns.name, check=False)
    laps.lap("network namespaces")
    _unmount_under(p.root, p.run, Path("/run/containerd"), Path("/var/lib/kubelet"))
    laps.lap("mounts")
    # kube-proxy's and kube-router's own cleanups, then our chains.
    if binary("kube-proxy").exists():
        _run(str(binary("kube-proxy")), "--cleanup", check=False)
    laps.lap("kube-proxy cleanup")
    _run("iptables", "-t", "raw", "-D", "PREROUTING", "-i", BRIDGE, "-j", GUARD_CHAIN, check=False)
    _run("iptables", "-t", "mangle", "-D", "FORWARD", "-j", GUARD_CHAIN, check=False)
    for table in ("raw", "mangle"):
        _run("iptables", "-t", table, "-F", GUARD_CHAIN, check=False)
        _run("iptables", "-t", table, "-X", GUARD_CHAIN, check=False)
    _delete_rules("filter", "INPUT", API_CHAIN)
    _run("iptables", "-F", API_CHAIN, check=False)
    _run("iptables", "-X", API_CHAIN, check=False)
    _run("ip6tables", "-t", "raw", "-D", "PREROUTING", "-i", BRIDGE, "-j", "DROP", check=False)
    _remove_kube_router_rules()
    for tool in ("iptables", "ip6tables"):
        _remove_kubelet_chains(tool)
    laps.lap("iptables rules and ipsets")
    _run("ip", "link", "del", BRIDGE, check=False)
    _run("ip", "route", "del", SERVICE_CIDR, check=False)
    if p.sysctl_file.exists():
        for k, v in json.loads(p.sysctl_file.read_text()).items():
            _run("sysctl", "-qw", f"{k}={v}", check=False)
    laps.lap("bridge, route, sysctls")
    for d in (p.root, p.run, *FIXED_PATHS):
        shutil.rmtree(d, ignore_errors=True)
    for d in (Path("/var/lib/kubelet"), Path("/run/netns")):
        with contextlib.suppress(OSError):
            d.rmdir()  # only when empty: someone else's kubelet state is not ours
    laps.lap("host directories")


# The chains the kubelet itself creates (it blocks localnet connections, canaries for flushes).
_KUBELET_CHAINS = {
    "filter": ("KUBE-FIREWALL", "KUBE-KUBELET-CANARY"),
    "mangle": ("KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"),
    "nat": ("KUBE-KUBELET-CANARY",),
}


def _remove_kubelet_chains(tool: str) -> None:
    for table, chains in _KUBELET_CHAINS.items():
        for chain in chains:
            for builtin in ("INPUT", "OUTPUT"):
                _delete_rules(table, builtin, chain, tool)
            _run(tool, "-t", table, "-F", chain, check=False)
            _run(tool, "-t", table, "-X", chain, check=False)


def _remove_kube_router_rules() -> None:
    """kube-router's filter chains (KUBE-ROUTER-*, KUBE-NWPLCY-*, KUBE-POD-FW-*) and ipsets."""
    listing = _run("iptables-save", "-t", "filter", check=False).stdout
    prefixes = ("KUBE-ROUTER-", "KUBE-NWPLCY-", "KUBE-POD-FW-")
    chains = [ln[1:].split()[0] for ln in listing.splitlines() if ln.startswith(":")]
    ours = [c for c in chains if c.startswith(prefixes)]
    for builtin in ("INPUT", "FORWARD", "OUTPUT"):
        for c in ours:
            _delete_rules("filter", builtin, c)
    for c in ours:
        _run("iptables", "-F", c, check=False)
    for c in ours:
        _run("iptables", "-X", c, check=False)
    names = _run("ipset", "list", "-n", check=False).stdout.split()
    for n in names:
        if n.startswith(("KUBE-SRC-", "KUBE-DST-", "kube-router-", "tmp")):
            _run("ipset", "destroy", n, check=False)


# -- command lines (pure) ------------------------------------------------------------------


def cert_kubeconfig(server: str, ca: Path, crt: Path, key: Path, user: str) -> str:
    """A kubeconfig that authenticates with a client certificate (JSON is valid YAML)."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca)}}
            ],
            "users": [
                {"name": user, "user": {"client-certificate": str(crt), "client-key": str(key)}}
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
            "current-context": "local",
        }
    )


def containerd_cmd(config: Path) -> list[str]:
    return [str(binary("containerd")), f"--config={config}", "--log-level=warn"]


def kubelet_cmd(p: NodePaths, config: Path, kubeconfig: Path) -> list[str]:
    return [
        str(binary("kubelet")),
        f"--config={config}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={p.root / 'kubelet'}",
        f"--cert-dir={p.root / 'kubelet-pki'}",
        f"--node-ip={BRIDGE_IP}",
        f"--hostname-override={NODE_NAME}",
        "--v=1",
    ]


def kube_proxy_cmd(config: Path) -> list[str]:
    return [str(binary("kube-proxy")), f"--config={config}", "--v=1"]


def kube_router_cmd(kubeconfig: Path) -> list[str]:
    """Firewall only: no BGP, no IPVS service proxy, no CNI; health and metrics ports off."""
    return [
        str(binary("kube-router")),
        f"--kubeconfig={kubeconfig}",
        "--run-firewall=true",
        "--run-router=false",
        "--run-service-proxy=false",
        "--enable-cni=false",
        "--enable-ipv6=false",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--health-port=0",
        "--metrics-port=0",
        f"--hostname-override={NODE_NAME}",
    ]


def build_check() -> None:
    """The node's binaries are built (``make node-binaries``); the fixtures never build."""
    missing = [n for n in NODE_BINARY_NAMES if not binary(n).is_file()]
    if missing:
        raise RealNodeError(
            f"missing node binaries: {', '.join(missing)}; build them with `make node-binaries`"
        )


NODE_BINARY_NAMES = (
    "kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "runc",
    "bridge", "host-local", "loopback", "portmap", "kube-router", "coredns",
)  # fmt: skip


def run_iptables(rule: list[str]) -> None:
    _run("iptables", *rule)


def import_images(
    p: NodePaths,
    cache: Path,
    repo: Path,
    extra: Sequence[tuple[Path, Callable[[Path], Path]]] = (),
) -> list[str]:
    """The pause and busybox archives and ``extra`` ones (each (archive, the function that
    writes it into ``cache``), built once) and the project's images ``make images`` built
    from ``repo``'s sources into containerd's k8s.io namespace; pods use
    ``imagePullPolicy: Never`` or ``IfNotPresent``. Returns the project images imported."""
    from swarmkit_devcluster import realnode_images as img

    cache.mkdir(parents=True, exist_ok=True)
    archives = [
        (cache / "pause.oci.tar", img.pause_archive),
        (img.busybox_path(cache), img.busybox_archive),
        *extra,
    ]
    ctr = [str(binary("ctr")), f"--address={p.containerd_sock}", "-n", "k8s.io"]
    for path, make in archives:
        if not path.exists():
            make(cache)
        _run(*ctr, "images", "import", str(path))
    imported = []
    for ref, path in img.project_archives(cache, repo):  # `make images`: runtime, operator
        _run(*ctr, "images", "import", str(path))
        imported.append(ref)
    return imported


def rbac_objects() -> list[dict[str, object]]:
    rules = [
        {
            "apiGroups": [""],
            "resources": ["pods", "namespaces", "nodes", "services", "endpoints"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["networking.k8s.io"],
            "resources": ["networkpolicies"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]

    def binding(name: str, role: str, subject: dict[str, str]) -> dict[str, object]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [subject],
        }

    user = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "swarmkit:kube-router"}
    nodes = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "swarmkit:kube-router"},
            "rules": rules,
        },
        binding("swarmkit:kube-router", "swarmkit:kube-router", user),
        binding("swarmkit:realnode-auth-delegator", "system:auth-delegator", nodes),
    ]


def namespace_annotations() -> dict[str, str]:
    """What puts a namespace's pods on the real node (the apiserver's PodNodeSelector and
    PodTolerationRestriction admission plugins): the operator's pods need no change."""
    toleration = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
    return {
        "scheduler.alpha.kubernetes.io/node-selector": f"kubernetes.io/hostname={NODE_NAME}",
        "scheduler.alpha.kubernetes.io/defaultTolerations": json.dumps([toleration]),
    }
