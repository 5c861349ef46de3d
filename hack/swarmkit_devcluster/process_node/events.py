"""Pod Events as a kubelet writes them (``source.component=kubelet``), so ``kubectl describe
pod`` reads as on a real node: Pulled, Created, Started, Failed, BackOff, Killing.

Best effort: an Event that cannot be written is logged and dropped, never retried (the
kubelet does the same). Messages never carry env values, so no Secret reaches an Event.
"""

from __future__ import annotations

import logging
import secrets

from swarmkit_devcluster.kubeapi import JSON, KubeClient
from swarmkit_devcluster.process_node.times import now_rfc3339

log = logging.getLogger("process-node")


def event_body(pod: JSON, node: str, typ: str, reason: str, message: str, field: str) -> JSON:
    """A ``v1`` Event about ``pod`` (``field`` e.g. ``spec.containers{main}``)."""
    md = pod["metadata"]
    ts = now_rfc3339()
    involved: JSON = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": md["name"],
        "namespace": md["namespace"],
        "uid": md["uid"],
    }
    if md.get("resourceVersion"):
        involved["resourceVersion"] = md["resourceVersion"]
    if field:
        involved["fieldPath"] = field
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{md['name']}.{secrets.token_hex(8)}",
            "namespace": md["namespace"],
        },
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": typ,
        "source": {"component": "kubelet", "host": node},
        "reportingComponent": "kubelet",
        "reportingInstance": node,
        "firstTimestamp": ts,
        "lastTimestamp": ts,
        "eventTime": None,
        "count": 1,
        "action": reason,
        "series": None,
    }


class EventRecorder:
    def __init__(self, client: KubeClient, node: str) -> None:
        self.client = client
        self.node = node

    def emit(
        self,
        pod: JSON,
        typ: str,
        reason: str,
        message: str,
        container: str = "",
        init: bool = False,
    ) -> None:
        field = ""
        if container:
            field = f"spec.{'initContainers' if init else 'containers'}{{{container}}}"
        body = event_body(pod, self.node, typ, reason, message, field)
        ns = pod["metadata"]["namespace"]
        try:
            self.client.create(f"/api/v1/namespaces/{ns}/events", body)
        except Exception as exc:  # best effort, like the kubelet's recorder
            log.warning(
                "%s/%s: event %s not recorded: %s", ns, pod["metadata"]["name"], reason, exc
            )
