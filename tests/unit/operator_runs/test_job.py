"""The Run's Job: names, security, mounts, secrets by reference, deadlines, labels."""

from __future__ import annotations

import json

from swarmkit_api.bundle import BUNDLE_MOUNT, SCRATCH_MOUNT, RunBundle, secret_env_name
from swarmkit_api.common import SecretKeyRef
from swarmkit_operator.builders.job import (
    DEADLINE_GRACE_SECONDS,
    POD_FINALIZER,
    build_job,
    bundle_config_map_name,
    job_name,
    label_value,
    user_labels,
    workspace_secret_refs,
)
from swarmkit_operator.config import OperatorConfig

from .fixtures import NAMESPACE, RUN_UID, example_bundle

SECRETS_WS = {
    "modelProviders": [
        {"name": "claude", "type": "anthropic", "apiKey": {"name": "llm", "key": "anthropic"}},
        {"name": "replay", "type": "replay"},
    ],
    "mcpServers": [
        {
            "id": "pg",
            "transport": "stdio",
            "command": ["pg-mcp"],
            "env": [
                {"name": "PGPASSWORD", "secretKeyRef": {"name": "db", "key": "password"}},
                {"name": "PGHOST", "value": "db.local"},
            ],
        },
        {
            "id": "issues",
            "transport": "http",
            "url": "https://mcp.example.com/mcp",
            "headers": [{"name": "Authorization", "secretKeyRef": {"name": "gh", "key": "tok"}}],
        },
    ],
    "tools": [
        {
            "name": "lookup",
            "description": "Look a thing up.",
            "http": {"url": "https://api.example.com/{q}"},
            "credentials": {"secretKeyRef": {"name": "api", "key": "token"}},
        }
    ],
    "credentials": [{"name": "peer", "secretKeyRef": {"name": "a2a", "key": "bearer"}}],
    "searchProvider": {"url": "https://search.example.com", "apiKey": {"name": "s", "key": "k"}},
}


def _job(config: OperatorConfig | None = None, **ws: object) -> dict[str, object]:
    run, rendered = example_bundle(config, workspace_patch=dict(ws))
    return build_job(
        run=run.ref,
        bundle=rendered.bundle,
        skill_mounts=rendered.skill_mounts,
        config=config or OperatorConfig(),
        bundle_config_map=bundle_config_map_name(run.name, run.uid),
        flow_data_keys=rendered.flow_data_keys,
    )


def _pod(job: dict[str, object]) -> dict[str, object]:
    return job["spec"]["template"]["spec"]  # type: ignore[index,no-any-return]


def test_job_name_is_short_unique_and_stable() -> None:
    assert job_name("review-demo", RUN_UID) == "run-review-demo-0a1b2"
    assert job_name("review-demo", RUN_UID, 2) == "run-review-demo-0a1b2-r2"
    long = "a" * 250
    for rec in (0, 1, 10):
        name = job_name(long, RUN_UID, rec)
        assert len(name) <= 63 and name.startswith("run-a") and "0a1b2" in name
    assert job_name("x." * 40, RUN_UID).count(".") == 0
    assert not job_name("ab-" * 30, RUN_UID).replace("-0a1b2", "").endswith("-")
    assert job_name("demo", "ffff1-xyz") != job_name("demo", "eeee1-xyz")
    assert bundle_config_map_name("review-demo", RUN_UID) == "run-review-demo-0a1b2-bundle"


def test_label_value_and_user_labels() -> None:
    assert label_value("review-demo") == "review-demo"
    value = label_value("x" * 100)
    assert len(value) <= 63
    kept, refused = user_labels(
        {"team": "a", "swarmkit.dev/run": "spoof", "bad key!": "v", "app.kubernetes.io/x": "y"}
    )
    assert kept == {"team": "a"}
    assert len(refused) == 3


def test_restricted_pod_and_runner_container() -> None:
    job = _job()
    spec = job["spec"]  # type: ignore[index]
    assert spec["backoffLimit"] == 0  # type: ignore[index]
    assert spec["activeDeadlineSeconds"] == 120 + DEADLINE_GRACE_SECONDS  # type: ignore[index]
    assert spec["ttlSecondsAfterFinished"] == 3600  # type: ignore[index]
    assert spec["podReplacementPolicy"] == "Failed"  # type: ignore[index]
    pod = _pod(job)
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True  # type: ignore[index]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}  # type: ignore[index]
    (container,) = pod["containers"]  # type: ignore[misc]
    assert container["args"] == ["run", "--bundle", BUNDLE_MOUNT]
    assert container["image"] == OperatorConfig().runtime_image
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts[SCRATCH_MOUNT]["name"] == "scratch"
    assert "/tmp" in mounts
    assert all(m.get("readOnly") for p, m in mounts.items() if p.startswith("/etc/swarmkit"))
    assert job["spec"]["template"]["metadata"]["finalizers"] == [POD_FINALIZER]  # type: ignore[index]


def test_owner_labels_and_image_override() -> None:
    job = _job(runtime={"image": "registry.local/swarmkit-runtime:dev", "backoffLimit": 2})
    meta = job["metadata"]  # type: ignore[index]
    (owner,) = meta["ownerReferences"]  # type: ignore[index]
    assert owner["kind"] == "Run" and owner["uid"] == RUN_UID and owner["controller"] is True
    labels = meta["labels"]  # type: ignore[index]
    assert labels["swarmkit.dev/run"] == "review-demo"
    assert labels["swarmkit.dev/run-uid"] == RUN_UID
    assert labels["swarmkit.dev/topology"] == "review-pipeline"
    assert labels["swarmkit.dev/topology-version"] == "topo-version-1"
    assert labels["agents.swarmkit.dev/coordinator"] == "v-coordinator"
    assert labels["agents.swarmkit.dev/reviewer"] == "v-reviewer"
    assert job["spec"]["template"]["metadata"]["labels"] == labels  # type: ignore[index]
    assert _pod(job)["containers"][0]["image"] == "registry.local/swarmkit-runtime:dev"  # type: ignore[index]
    assert job["spec"]["backoffLimit"] == 2  # type: ignore[index]
    assert meta["namespace"] == NAMESPACE  # type: ignore[index]


def test_every_secret_reference_becomes_env_by_reference() -> None:
    job = _job(**SECRETS_WS)
    env = _pod(job)["containers"][0]["env"]  # type: ignore[index]
    by_name = {e["name"]: e for e in env}
    expected = [
        SecretKeyRef(name="llm", key="anthropic"),
        SecretKeyRef(name="db", key="password"),
        SecretKeyRef(name="gh", key="tok"),
        SecretKeyRef(name="api", key="token"),
        SecretKeyRef(name="a2a", key="bearer"),
        SecretKeyRef(name="s", key="k"),
    ]
    for ref in expected:
        entry = by_name[secret_env_name(ref)]
        assert entry == {
            "name": secret_env_name(ref),
            "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
        }
    assert all("value" not in e or not e["name"].startswith("SWARMKIT_SECRET") for e in env)
    _run, rendered = example_bundle(workspace_patch=SECRETS_WS)
    assert len(workspace_secret_refs(rendered.bundle.workspace)) == len(expected)


def test_skill_files_mounted_at_real_paths() -> None:
    job = _job()
    pod = _pod(job)
    volumes = {v["name"]: v for v in pod["volumes"]}  # type: ignore[union-attr,index]
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}  # type: ignore[index]
    triage = next(
        name for name, path in mounts.items() if path == "/etc/swarmkit/skills/incident-triage"
    )
    items = {i["path"]: i for i in volumes[triage]["configMap"]["items"]}
    assert set(items) == {
        "reference/escalation-matrix.md",
        "scripts/classify_severity.py",
        "SKILL.md",
    }
    assert items["scripts/classify_severity.py"]["mode"] == 0o555
    assert items["reference/escalation-matrix.md"]["mode"] == 0o444
    assert items["reference/escalation-matrix.md"]["key"].startswith("file.")
    assert volumes[triage]["configMap"]["name"].startswith("skill-incident-triage-")
    assert mounts["bundle"] == BUNDLE_MOUNT
    assert mounts["flow-data"] == "/etc/swarmkit/flow-data"
    flow_items = volumes["flow-data"]["configMap"]["items"]
    assert flow_items == [{"key": "flow.0", "path": "exclusions.yaml"}]


def test_bundle_in_job_roundtrips() -> None:
    _run, rendered = example_bundle()
    again = RunBundle.model_validate(json.loads(rendered.bundle.to_json()))
    assert again == rendered.bundle


def test_runtime_class_from_the_workspace_overridden_by_the_root_agent() -> None:
    assert "runtimeClassName" not in _pod(_job())
    assert _pod(_job(runtime={"runtimeClassName": "gvisor"}))["runtimeClassName"] == "gvisor"
    run, rendered = example_bundle(workspace_patch={"runtime": {"runtimeClassName": "gvisor"}})
    bundle = rendered.bundle
    root = bundle.agents["coordinator"]  # the review-pipeline topology's root
    kata = root.model_copy(
        update={"spec": root.spec.model_copy(update={"runtime_class_name": "kata"})}
    )
    bundle = bundle.model_copy(update={"agents": {**bundle.agents, "coordinator": kata}})
    job = build_job(
        run=run.ref,
        bundle=bundle,
        skill_mounts=rendered.skill_mounts,
        config=OperatorConfig(),
        bundle_config_map=bundle_config_map_name(run.name, run.uid),
        flow_data_keys=rendered.flow_data_keys,
    )
    assert _pod(job)["runtimeClassName"] == "kata"
    # another (non-root) agent's choice does not apply to the Run's pod
    other = bundle.agents["reviewer"]
    gv = other.model_copy(
        update={"spec": other.spec.model_copy(update={"runtime_class_name": "x"})}
    )
    bundle = bundle.model_copy(
        update={"agents": {**bundle.agents, "reviewer": gv, "coordinator": root}}
    )
    job = build_job(
        run=run.ref,
        bundle=bundle,
        skill_mounts=rendered.skill_mounts,
        config=OperatorConfig(),
        bundle_config_map=bundle_config_map_name(run.name, run.uid),
        flow_data_keys=rendered.flow_data_keys,
    )
    assert _pod(job)["runtimeClassName"] == "gvisor"
