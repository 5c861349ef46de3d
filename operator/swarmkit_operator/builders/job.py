"""The Job of a Run (pure: a RunBundle, the Workspace and the operator config → a Job dict).

One Run → exactly one ``batch/v1`` Job at a time, named from the Run's name and uid
(``run-<name>-<uid[:5]>``, ``-r<n>`` for the n-th recreation after the Job was lost), so a
quick delete-and-recreate of a Run never collides and an operator restart re-finds the Job
instead of creating a second one.

The pod is the shared runner pod (:func:`.pod.runner_pod_spec`: image, pinned ConfigMap
mounts, secrets as ``secretKeyRef``, the locked-down security context, resources), started
as ``run --bundle /etc/swarmkit/bundle``. The Job adds:

* ``activeDeadlineSeconds`` = the run timeout plus :data:`DEADLINE_GRACE_SECONDS` (the runner
  enforces the timeout itself and reports ``TimedOut``; the Job deadline is the backstop),
  ``backoffLimit`` (0 by default), ``ttlSecondsAfterFinished``, ``podReplacementPolicy:
  Failed`` (never two runner pods at once) and a pod failure policy (an invalid bundle,
  exit code 2, fails at once; a disrupted pod is retried without counting);
* the finalizer :data:`POD_FINALIZER` on the pod, so the pod (and its termination message)
  outlives a Job deleted by its TTL or by a person until the operator has recorded the
  outcome; the operator removes it right after.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from swarmkit_api.bundle import (
    BUNDLE_MOUNT,
    CHECKPOINT_SHA256_ENV,
    RunBundle,
)
from swarmkit_api.common import RESERVED_LABEL_DOMAINS, is_valid_label
from swarmkit_api.review import CHECKPOINT_FILE, DECISION_FILE, RESUME_MOUNT

from ..config import OperatorConfig
from ..hashing import label_value
from . import RUN_LABEL
from .pod import (
    CONTAINER_NAME,
    DEFAULT_RESOURCES,
    FLOW_DATA_MOUNT,
    RUNNER_UID,
    TMP_MOUNT,
    SkillFileItem,
    SkillMount,
    pod_template,
    runner_pod_spec,
    runtime_class,
    runtime_defaults,
    secret_env,
    skill_directory,
    workspace_image,
    workspace_secret_refs,
)
from .tracing import tracing_env
from .workload import Target
from .workload import owner_reference as workload_owner

API_GROUP = "swarmkit.dev"
RUN_API_VERSION = "swarmkit.dev/v1alpha1"

#: Labels every Run child carries (RUN_LABEL is shared with the reconcile loop's GC).
RUN_UID_LABEL = "swarmkit.dev/run-uid"
TOPOLOGY_LABEL = "swarmkit.dev/topology"
TOPOLOGY_VERSION_LABEL = "swarmkit.dev/topology-version"
AGENT_LABEL = "swarmkit.dev/agent"
#: ``agents.swarmkit.dev/<agent>: <version>`` for every agent the run pins.
AGENT_VERSION_LABEL_PREFIX = "agents.swarmkit.dev/"
RECREATION_LABEL = "swarmkit.dev/job-recreation"
RESUME_LABEL = "swarmkit.dev/resume"
MANAGED_BY_LABELS = {
    "app.kubernetes.io/name": "swarmkit-runner",
    "app.kubernetes.io/component": "run",
    "app.kubernetes.io/managed-by": "swarmkit-operator",
}
RUN_NAME_ANNOTATION = "swarmkit.dev/run-name"
CORRELATION_ANNOTATION = "swarmkit.dev/correlation-id"
BUNDLE_ANNOTATION = "swarmkit.dev/bundle-config-map"
#: On a resumed stage's pod template: the decision (JSON) the runner resumes with, derived
#: from the Review by the operator, mounted as decision.json through the downward API.
DECISION_ANNOTATION = "swarmkit.dev/resume-decision"

#: Keeps the pod (and its termination message) until the operator recorded the outcome.
POD_FINALIZER = "swarmkit.dev/run-outcome"
#: Exit code of the runner for an invalid bundle / configuration (ValidationFailed).
EXIT_VALIDATION_FAILED = 2
#: Seconds the Job deadline trails the run timeout the runner enforces itself.
DEADLINE_GRACE_SECONDS = 10
MAX_NAME = 63


def _dns_label(text: str) -> str:
    """``text`` reduced to DNS-label characters (dots and others become dashes)."""
    out = re.sub(r"[^a-z0-9-]+", "-", text.lower())
    return re.sub(r"-{2,}", "-", out).strip("-")


def job_name(run_name: str, run_uid: str, recreation: int = 0, resume: int = 0) -> str:
    """``run-<name>-<uid[:5]>`` (``-resume-<n>`` for the n-th resume after a review, ``-r<n>``
    when recreated), at most 63 characters.

    The name is shortened (never the uid part) so that the result is a valid DNS label:
    the Job controller puts it in the ``job-name`` label of the pod.
    """
    uid5 = _dns_label(run_uid)[:5] or "00000"
    suffix = f"-{uid5}" + (f"-resume-{resume}" if resume else "")
    suffix += f"-r{recreation}" if recreation else ""
    room = MAX_NAME - len("run-") - len(suffix)
    body = _dns_label(run_name)[:room].rstrip("-") or "x"
    return f"run-{body}{suffix}"


def bundle_config_map_name(run_name: str, run_uid: str) -> str:
    """``run-<name>-<uid5>-bundle``: the run's immutable bundle ConfigMap."""
    return f"{job_name(run_name, run_uid)}-bundle"


def user_labels(labels: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Run.spec.labels safe to copy to the Job and pod, and the keys refused (with why)."""
    kept: dict[str, str] = {}
    refused: list[str] = []
    for key, value in sorted(labels.items()):
        prefix = key.rpartition("/")[0]
        if any(prefix == d or prefix.endswith("." + d) for d in RESERVED_LABEL_DOMAINS):
            refused.append(f"{key} (reserved prefix)")
        elif not is_valid_label(key, value):
            refused.append(f"{key} (not a valid label)")
        else:
            kept[key] = value
    return kept, refused


@dataclass(frozen=True)
class ResumeFiles:
    """What a resumed stage mounts: the previous stage's checkpoint (an immutable
    ConfigMap, checked against ``status.checkpointSha256`` first, see :mod:`.review`) and
    the decision, taken from the Review and carried in the pod template's annotation
    :data:`DECISION_ANNOTATION` (a downward API file): no object a namespace editor can
    create decides a Review."""

    checkpoint_config_map: str
    decision_json: str
    #: What the runner reported for that checkpoint (``status.checkpointSha256``): the
    #: resumed runner refuses another file (``SWARMKIT_CHECKPOINT_SHA256``).
    checkpoint_sha256: str = ""


@dataclass(frozen=True)
class RunRef:
    """The identity of the Run that owns the Job."""

    name: str
    namespace: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=dict)
    correlation_id: str | None = None


def target_of(run: RunRef) -> Target:
    """The Run as the owner of its workload (its Job, bundle and NetworkPolicy)."""
    return Target("Run", run.namespace, run.name, run.uid, run.name, run.labels)


def owner_reference(run: RunRef) -> dict[str, Any]:
    """The ownerReference of every Run child (Job and bundle ConfigMap)."""
    return workload_owner(target_of(run))


def run_labels(run: RunRef, bundle: RunBundle | None = None) -> dict[str, str]:
    """Labels linking a child to its Run, Topology and agent versions."""
    labels = dict(MANAGED_BY_LABELS)
    labels[RUN_LABEL] = label_value(run.name)
    labels[RUN_UID_LABEL] = label_value(run.uid)
    if bundle is not None:
        if bundle.target_kind == "Topology":
            labels[TOPOLOGY_LABEL] = label_value(bundle.target)
            topo = bundle.topologies.get(bundle.target)
            if topo is not None:
                labels[TOPOLOGY_VERSION_LABEL] = label_value(topo.version)
        else:
            labels[AGENT_LABEL] = label_value(bundle.target)
        for name, agent in sorted(bundle.agents.items()):
            key = AGENT_VERSION_LABEL_PREFIX + name
            value = label_value(agent.version)
            if is_valid_label(key, value):
                labels[key] = value
    return labels


def _checkpoint_env(resume_files: ResumeFiles | None) -> list[dict[str, Any]]:
    if resume_files is None or not resume_files.checkpoint_sha256:
        return []
    return [{"name": CHECKPOINT_SHA256_ENV, "value": resume_files.checkpoint_sha256}]


def _resume_mounts(
    resume_files: ResumeFiles | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """A resumed stage's volumes, mounts and runner arguments: the checkpoint ConfigMap,
    and the decision from the pod's own annotation (:data:`DECISION_ANNOTATION`)."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    args: list[str] = []
    if resume_files is None:
        return volumes, mounts, args
    decision_field = f"metadata.annotations['{DECISION_ANNOTATION}']"
    for volume, source, key in (
        (
            "resume-checkpoint",
            {"configMap": {"name": resume_files.checkpoint_config_map}},
            CHECKPOINT_FILE,
        ),
        ("resume-decision", {"downwardAPI": {"fieldRef": decision_field}}, DECISION_FILE),
    ):
        volumes.append({"name": volume, **_resume_volume(source, key)})
        where = f"{RESUME_MOUNT}/{volume.removeprefix('resume-')}"
        mounts.append({"name": volume, "mountPath": where, "readOnly": True})
        args += [f"--{volume.removeprefix('resume-')}", f"{where}/{key}"]
    return volumes, mounts, args


def _resume_volume(source: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A read-only volume holding one file ``key``: a ConfigMap key, or a downward API
    field (``{"downwardAPI": {"fieldRef": path}}``)."""
    if "configMap" in source:
        name = source["configMap"]["name"]
        keys = [{"key": key, "path": key}]
        return {"configMap": {"name": name, "defaultMode": 0o444, "items": keys}}
    field = source["downwardAPI"]["fieldRef"]
    items: list[dict[str, Any]] = [{"path": key, "fieldRef": {"fieldPath": field}}]
    return {"downwardAPI": {"defaultMode": 0o444, "items": items}}


def pod_failure_policy() -> dict[str, Any]:
    """An invalid bundle (exit code 2) fails the Job at once; a disrupted pod is retried
    without counting against ``backoffLimit``."""
    return {
        "rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": CONTAINER_NAME,
                    "operator": "In",
                    "values": [EXIT_VALIDATION_FAILED],
                },
            },
        ]
    }


def _job_labels(run: RunRef, bundle: RunBundle, recreation: int, resume: int) -> dict[str, str]:
    """The Job's (and its pod's) labels: the Run's own valid ones under the operator's."""
    extra_labels, _refused = user_labels(run.labels)
    labels = {**extra_labels, **run_labels(run, bundle)}
    if recreation:
        labels[RECREATION_LABEL] = str(recreation)
    if resume:
        labels[RESUME_LABEL] = str(resume)
    return labels


def active_deadline_seconds(timeout_seconds: int) -> int:
    return timeout_seconds + DEADLINE_GRACE_SECONDS


def build_job(
    *,
    run: RunRef,
    bundle: RunBundle,
    skill_mounts: Sequence[SkillMount],
    config: OperatorConfig,
    bundle_config_map: str,
    flow_data_keys: Mapping[str, str] | None = None,
    recreation: int = 0,
    resume: int = 0,
    resume_files: ResumeFiles | None = None,
    bundle_sha256: str | None = None,
) -> dict[str, Any]:
    """The Run's Job. ``flow_data_keys`` maps bundle ConfigMap keys → flow data paths;
    ``resume``/``resume_files``: the n-th resume after a review, from those files;
    ``bundle_sha256``: of the bundle.json written, checked by the runner before it runs."""
    workspace = bundle.workspace
    runtime = runtime_defaults(workspace)
    name = job_name(run.name, run.uid, recreation, resume)
    labels = _job_labels(run, bundle, recreation, resume)
    annotations = {
        RUN_NAME_ANNOTATION: run.name,
        BUNDLE_ANNOTATION: bundle_config_map,
        CORRELATION_ANNOTATION: bundle.run.correlation_id,
    }

    args = ["run", "--bundle", BUNDLE_MOUNT]
    resume_volumes, resume_mounts, resume_args = _resume_mounts(resume_files)
    args += resume_args
    pod_annotations = dict(annotations)
    if resume_files is not None:
        pod_annotations[DECISION_ANNOTATION] = resume_files.decision_json
    pod_spec = runner_pod_spec(
        workspace=workspace,
        config=config,
        args=args,
        bundle_config_map=bundle_config_map,
        skill_mounts=skill_mounts,
        flow_data_keys=flow_data_keys,
        runtime_class_name=runtime_class(bundle),
        extra_env=[
            *tracing_env(run.uid, workspace.tracing),  # tracing hook: the Run's trace
            *_checkpoint_env(resume_files),
        ],
        bundle_sha256=bundle_sha256,
    )
    # A resumed stage also mounts its checkpoint and the decision (read-only).
    pod_spec["volumes"] += resume_volumes
    pod_spec["containers"][0]["volumeMounts"] += resume_mounts
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": run.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(run)],
        },
        "spec": {
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": runtime.backoff_limit,
            "activeDeadlineSeconds": active_deadline_seconds(bundle.run.timeout_seconds),
            "ttlSecondsAfterFinished": runtime.job_ttl_seconds_after_finished,
            "podReplacementPolicy": "Failed",
            "podFailurePolicy": pod_failure_policy(),
            "template": pod_template(
                pod_spec, labels=labels, annotations=pod_annotations, finalizers=[POD_FINALIZER]
            ),
        },
    }


__all__ = [
    "BUNDLE_ANNOTATION",
    "CONTAINER_NAME",
    "DECISION_ANNOTATION",
    "DEFAULT_RESOURCES",
    "FLOW_DATA_MOUNT",
    "POD_FINALIZER",
    "RUNNER_UID",
    "RUN_LABEL",
    "RUN_UID_LABEL",
    "TMP_MOUNT",
    "ResumeFiles",
    "RunRef",
    "SkillFileItem",
    "SkillMount",
    "build_job",
    "bundle_config_map_name",
    "job_name",
    "label_value",
    "owner_reference",
    "run_labels",
    "secret_env",
    "skill_directory",
    "target_of",
    "user_labels",
    "workspace_image",
    "workspace_secret_refs",
]
