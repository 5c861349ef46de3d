"""After the whole reliability suite: the test secrets' values appear nowhere they must not.

Runs last in ``tests/chaos`` (file order). Every namespace the suite used is still there
(see ``kept_namespaces``); the scan reads every ConfigMap, every swarmkit object's status,
every Event, every Job and pod spec, every operator log, every runner log (the process
node's pod logs, and the runner output of the runner-level tests) and every span the Runs
exported to the suite's Jaeger (content captured, uncapped) and looks for each Secret value
the suite created, in clear and in the encodings tests/support/planted.py lists (the same
planted kind and forms as tests/integration/test_runs_scrubbing.py). The Secrets themselves
are the control: the scan must find each value there, and at least one runner pod must have
had it as an env var through ``secretKeyRef`` (so the runner really held it).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from swarmkit_api import decoding
from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube
from tests.support import planted

from ..integration.runs_support import GROUP, PLURALS, VERSION
from .support import LEDGER, record


def _hits(text: str) -> list[str]:
    """Each secret in clear, base64 (3 alignments) or URL-encoded (tests/support/planted.py:
    the forms the scrubbing test looks for)."""
    return planted.hits(text, LEDGER.secrets)


def test_no_secret_value_in_configmaps_status_events_pod_specs_or_logs(
    cluster: LocalCluster, kube: Kube
) -> None:
    if not LEDGER.namespaces and not LEDGER.outputs:
        pytest.skip("run with the rest of tests/chaos: it scans what the suite left")
    assert LEDGER.secrets, "the suite created no test secret"
    found: list[str] = []
    scanned = {"configMaps": 0, "objects": 0, "events": 0, "pods": 0, "jobs": 0, "logLines": 0}
    referenced = 0
    controls = set()
    for ns in LEDGER.namespaces:
        for s in kube.core.list_namespaced_secret(ns).items:
            for v in (s.data or {}).values():
                controls.update(_hits(base64.b64decode(v).decode(errors="replace")))
        for cm in kube.core.list_namespaced_config_map(ns).items:
            scanned["configMaps"] += 1
            text = json.dumps({"data": cm.data, "meta": cm.metadata.to_dict()}, default=str)
            found += [f"ConfigMap {ns}/{cm.metadata.name}" for _ in _hits(text)]
        for kind, plural in PLURALS.items():
            # Read raw and decoded as the operator does: the poison tests leave objects
            # nested deeper than Python's own decoder takes (swarmkit_api.decoding).
            raw = kube.custom.list_namespaced_custom_object(
                GROUP, VERSION, ns, plural, _preload_content=False
            )
            for o in decoding.loads(raw.data)["items"]:
                scanned["objects"] += 1
                text = json.dumps(o.get("status") or {})
                found += [f"{kind} {ns}/{o['metadata']['name']} status" for _ in _hits(text)]
        for e in kube.core.list_namespaced_event(ns).items:
            scanned["events"] += 1
            text = f"{e.reason} {e.message}"
            found += [f"Event {ns}/{e.metadata.name}" for _ in _hits(text)]
        for j in kube.batch.list_namespaced_job(ns).items:
            scanned["jobs"] += 1
            text = json.dumps(j.spec.to_dict(), default=str)
            found += [f"Job {ns}/{j.metadata.name} spec" for _ in _hits(text)]
        for p in kube.core.list_namespaced_pod(ns).items:
            scanned["pods"] += 1
            spec: dict[str, Any] = p.spec.to_dict()
            text = json.dumps(spec, default=str)
            found += [f"pod {ns}/{p.metadata.name} spec" for _ in _hits(text)]
            referenced += "secret_key_ref" in text and "chaos-keys" in text
        for log in sorted(cluster.pods_dir.glob(f"{ns}_*/*.log")):
            text = log.read_text(errors="replace")
            scanned["logLines"] += text.count("\n")
            found += [f"runner log {log}" for _ in _hits(text)]
    for path in LEDGER.logs:
        text = path.read_text(errors="replace") if path.exists() else ""
        scanned["logLines"] += text.count("\n")
        found += [f"operator log {path}" for _ in _hits(text)]
    spans = 0
    if LEDGER.jaeger is not None:  # every span the Runs exported (content on, uncapped)
        for service in LEDGER.jaeger.services():
            for t in LEDGER.jaeger.traces_of(service):
                spans += len(t.get("spans") or [])
                found += [f"exported span of {service}" for _ in _hits(json.dumps(t))]
    scanned["spans"] = spans
    for i, text in enumerate(LEDGER.outputs):
        scanned["logLines"] += text.count("\n")
        found += [f"runner-level output #{i}" for _ in _hits(text)]
    assert controls == LEDGER.cluster_secrets, "the scan could not find the values in the Secrets"
    assert referenced, "no runner pod referenced the test Secret: nothing was really at risk"
    if LEDGER.namespaces and LEDGER.jaeger is not None:
        assert spans, "no Run exported a span: the trace scan saw nothing"
    assert found == [], found
    record("secrets_scan", {"secrets": len(LEDGER.secrets), "scanned": scanned, "hits": 0})
