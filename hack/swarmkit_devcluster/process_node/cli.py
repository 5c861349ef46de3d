"""The command line: ``python -m swarmkit_devcluster.process_node --kubeconfig K ...``
(started by :class:`swarmkit_devcluster.cluster.LocalCluster`)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
from pathlib import Path

import yaml

from swarmkit_devcluster.kubeapi import KubeClient
from swarmkit_devcluster.paths import repo_root
from swarmkit_devcluster.process_node.images import ImageMap, ImageStore, default_store_dir
from swarmkit_devcluster.process_node.node import DEFAULT_NODE_NAME, ProcessNode

log = logging.getLogger("process-node")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m swarmkit_devcluster.process_node")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--name", default=os.environ.get("SWARMKIT_NODE_NAME", DEFAULT_NODE_NAME))
    p.add_argument("--state-dir", default=None, help="pod directories go to <state-dir>/pods")
    p.add_argument("--image-map", default=os.environ.get("SWARMKIT_NODE_IMAGE_MAP"))
    p.add_argument(
        "--image-store",
        default=str(default_store_dir()),
        help="local root filesystems of images (index.json; `make images` fills the default)",
    )
    p.add_argument("--tls-cert", default=None, help="serving cert for the kubelet (logs) port")
    p.add_argument("--tls-key", default=None)
    p.add_argument("--max-pods", type=int, default=110)
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(threadName)s: %(message)s",
    )
    try:
        image_map = ImageMap.load(args.image_map)
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        log.error("cannot load the image table %s: %s", args.image_map, exc)
        return 2
    client = KubeClient.from_kubeconfig(args.kubeconfig)
    state_dir = Path(args.state_dir or Path(args.kubeconfig).resolve().parent)
    node = ProcessNode(
        client,
        name=args.name,
        state_dir=state_dir,
        image_map=image_map,
        image_store=ImageStore(Path(args.image_store), repo_root()),
        api_host=client.host,
        api_port=client.port,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        pods=args.max_pods,
    )

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping pods and exiting", signum)
        node.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    node.run()
    return 0
