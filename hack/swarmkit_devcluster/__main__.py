"""``python -m swarmkit_devcluster <command>``: build, clients, images, up, down, status,
operator-up, operator-down, demo."""

from __future__ import annotations

import argparse
import sys
import time

from swarmkit_devcluster.build import BuildError, build
from swarmkit_devcluster.cluster import ClusterError, LocalCluster
from swarmkit_devcluster.imagebuild import ImageBuildError, build_images, image_status
from swarmkit_devcluster.paths import NODE_BINARIES, WEB_AUTH_BINARIES, repo_root


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m swarmkit_devcluster",
        description="The local Kubernetes control plane for swarmkit-operator tests and demo.",
    )
    p.add_argument(
        "--state-dir",
        default=None,
        help="cluster state directory (default: $SWARMKIT_CLUSTER_DIR or <repo>/.cluster)",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the binaries once into ~/.cache/swarmkit-operator")
    b.add_argument("--force", action="store_true", help="rebuild even when cached")
    b.add_argument("names", nargs="*", help="only these binaries")
    b.add_argument(
        "--node",
        action="store_true",
        help="the real node's binaries (kubelet, kube-proxy, containerd, runc, CNI, kube-router,"
        " CoreDNS)",
    )
    b.add_argument(
        "--web-auth",
        action="store_true",
        help="oauth2-proxy and an OIDC provider (mockoidc) for the per-user web view tests",
    )
    sub.add_parser(
        "clients",
        help="build/install the third-party A2A and MCP SDK clients the tests drive (cached)",
    )
    sub.add_parser(
        "harness-clis", help="install (once, cached) the pinned coding harness CLIs (npm ci)"
    )
    sub.add_parser("jaeger", help="build (once, cached) the Jaeger the tracing tests and demo use")
    im = sub.add_parser("images", help="build the runtime and operator images (make images)")
    im.add_argument("--force", action="store_true", help="rebuild even when cached")
    im.add_argument("--pin", action="store_true", help="rewrite the wheel constraints files")
    im.add_argument("--status", action="store_true", help="say whether the images are current")
    im.add_argument(
        "--if-built",
        action="store_true",
        help="rebuild stale images only when they were built before (make test's fast path)",
    )
    im.add_argument("names", nargs="*", help="only these images (runtime, operator)")
    sub.add_parser("up", help="start the control plane and the process node (idempotent)")
    sub.add_parser("down", help="stop everything started by `up` and remove the state")
    sub.add_parser("status", help="say whether the cluster is running")
    op = sub.add_parser("operator-up", help="apply crds/*.yaml and run the operator in background")
    op.add_argument("args", nargs=argparse.REMAINDER, help="extra operator arguments")
    sub.add_parser("operator-down", help="stop the background operator")
    sub.add_parser("demo", help="the end-to-end demo")
    a = p.parse_args(argv)

    try:
        if a.cmd == "build":
            t0 = time.monotonic()
            print("building cluster binaries (cached after the first build):", file=sys.stderr)
            group = NODE_BINARIES if a.node else WEB_AUTH_BINARIES if a.web_auth else None
            build(a.names or (list(group) if group else None), force=a.force)
            print(f"build: done in {time.monotonic() - t0:.1f}s", file=sys.stderr)
            return 0
        if a.cmd == "clients":
            from swarmkit_devcluster.clients import ensure_clients

            t0 = time.monotonic()
            built = ensure_clients()
            print(f"clients: ready in {time.monotonic() - t0:.1f}s: {built.go_client}, "
                  f"{built.node_dir}", file=sys.stderr)  # fmt: skip
            return 0
        if a.cmd == "harness-clis":
            from swarmkit_devcluster.harness_clis import ensure_harness_clis

            print(f"harness-clis: {ensure_harness_clis()}", file=sys.stderr)
            return 0
        if a.cmd == "jaeger":
            from swarmkit_devcluster.jaeger import build_jaeger

            print(f"jaeger: {build_jaeger()}", file=sys.stderr)
            return 0
        if a.cmd == "images":
            return images_command(a)
        cluster = LocalCluster(a.state_dir)
        if a.cmd == "up":
            cluster.start()
            print(f"kubectl and helm: {cluster.bin_dir}/")
            print(f"logs: {cluster.logs_dir}/")
            print("use it with:")
            print(f"  export KUBECONFIG={cluster.kubeconfig}")
            print(f'  export PATH="{cluster.bin_dir}:$PATH"')
            return 0
        if a.cmd == "down":
            was = cluster.state_file.exists()
            t0 = time.monotonic()
            laps = cluster.stop()
            msg = "cluster stopped" if was else "no cluster state found; nothing to stop"
            print(f"{msg} ({time.monotonic() - t0:.1f}s: {laps.line()})", file=sys.stderr)
            return 0
        if a.cmd == "status":
            if cluster.is_running():
                print(f"running: {cluster.server}  KUBECONFIG={cluster.kubeconfig}")
                print(f"operator: {'running' if cluster.operator_running() else 'stopped'}")
                return 0
            print("not running")
            return 1
        if a.cmd == "operator-up":
            extra = [x for x in a.args if x != "--"]
            cluster.start_operator(extra)
            return 0
        if a.cmd == "operator-down":
            stopped = cluster.stop_operator()
            print("operator stopped" if stopped else "operator was not running", file=sys.stderr)
            return 0
        if a.cmd == "demo":
            from swarmkit_devcluster.demo import run_demo

            return run_demo(cluster)
    except (BuildError, ClusterError, ImageBuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


def images_command(a: argparse.Namespace) -> int:
    repo = repo_root()
    if a.pin:
        from swarmkit_devcluster.imagebuild.lock import pin

        pin(repo)
        return 0
    status = image_status(repo)
    if a.status:
        for ref, state in status.items():
            print(f"{state:8} {ref}")
        return 0 if all(s == "ok" for s in status.values()) else 1
    if a.if_built:
        stale = [r for r, s in status.items() if s == "stale"]
        if not stale:
            states = ", ".join(sorted(set(status.values())))
            print(f"images: nothing to rebuild ({states}); `make images` builds them",
                  file=sys.stderr)  # fmt: skip
            return 0
        print(f"images: rebuilding stale {', '.join(stale)}", file=sys.stderr)
    t0 = time.monotonic()
    records = build_images(repo, a.names or None, force=a.force)
    for _name, rec in sorted(records.items()):
        print(f"{rec['reference']}: {rec['rootfsBytes'] / 2**20:.0f} MiB, "
              f"built in {rec['buildSeconds']:.0f}s at {rec['builtAt']}")  # fmt: skip
    print(f"images: done in {time.monotonic() - t0:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
