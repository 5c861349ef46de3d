"""A Workspace's ``tracing``: validation, the Run's trace id and the Job's environment."""

from __future__ import annotations

import dataclasses
import random
import uuid
from typing import Any

import pytest
from pydantic import ValidationError

from swarmkit_api.endpoints import declared_endpoints
from swarmkit_api.tracing import TracingSpec, root_span_id, sampled, trace_id_for, traceparent
from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator.builders.job import build_job, bundle_config_map_name
from swarmkit_operator.builders.tracing import serving_env
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.runs.tracing import exporting, status_fields

from .fixtures import RUN_UID, example_bundle

ENDPOINT = "http://otel-collector.observability:4318"


def _env(tracing: dict[str, Any] | None) -> list[dict[str, Any]]:
    patch = {"tracing": tracing} if tracing is not None else {}
    run, rendered = example_bundle(None, workspace_patch=patch)
    job = build_job(
        run=run.ref,
        bundle=rendered.bundle,
        skill_mounts=rendered.skill_mounts,
        config=OperatorConfig(),
        bundle_config_map=bundle_config_map_name(run.name, run.uid),
        flow_data_keys=rendered.flow_data_keys,
    )
    env: list[dict[str, Any]] = job["spec"]["template"]["spec"]["containers"][0]["env"]
    return env


def test_the_trace_id_is_the_run_uid_and_every_job_of_the_run_gets_the_same_parent() -> None:
    assert trace_id_for(RUN_UID) == "0a1b2c3d4e5f6789abcdef0123456789"
    parent = traceparent(RUN_UID)
    assert parent == f"00-0a1b2c3d4e5f6789abcdef0123456789-{root_span_id(RUN_UID)}-01"
    assert traceparent(RUN_UID) == parent  # a resumed Job computes the same
    assert root_span_id(RUN_UID) != root_span_id("ffffffff-4e5f-6789-abcd-ef0123456789")


def test_sampling_is_decided_from_the_trace_id_uniformly_over_real_uids() -> None:
    rng = random.Random(7)
    uids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(4000)]
    for ratio in (0.1, 0.25, 0.5, 0.9):
        share = sum(sampled(trace_id_for(u), ratio) for u in uids) / len(uids)
        assert abs(share - ratio) < 0.03, (ratio, share)
    assert all(sampled(trace_id_for(u), 1.0) for u in uids)
    assert not any(sampled(trace_id_for(u), 0.0) for u in uids)
    unsampled = next(u for u in uids if not sampled(trace_id_for(u), 0.25))
    assert traceparent(unsampled, 0.25).endswith("-00")
    ws = WorkspaceSpec.model_validate({"tracing": {"endpoint": ENDPOINT, "samplingRatio": 0.25}})
    assert status_fields(unsampled, ws.tracing) == {}
    assert status_fields(RUN_UID, None) == {}


def test_job_env_carries_endpoint_parent_sampler_and_headers_by_reference() -> None:
    ref = {"name": "otlp", "key": "headers"}
    env = {e["name"]: e for e in _env({"endpoint": ENDPOINT, "headersSecretRef": ref})}
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == ENDPOINT
    assert env["TRACEPARENT"]["value"] == traceparent(RUN_UID)
    assert env["OTEL_TRACES_SAMPLER"]["value"] == "parentbased_always_on"
    # The headers (an API key) stay in the Secret: a reference, never a value.
    assert env["OTEL_EXPORTER_OTLP_HEADERS"] == {
        "name": "OTEL_EXPORTER_OTLP_HEADERS",
        "valueFrom": {"secretKeyRef": {"name": "otlp", "key": "headers"}},
    }
    assert "SWARMKIT_TRACE_CONTENT_CHARS" not in env
    assert "OTEL_METRICS_EXPORTER" not in env  # metrics are opt-in too
    metrics = {e["name"]: e for e in _env({"endpoint": ENDPOINT, "metrics": True})}
    assert metrics["OTEL_METRICS_EXPORTER"]["value"] == "otlp"


def test_content_is_opt_in_and_capped() -> None:
    tracing = {"endpoint": ENDPOINT, "captureContent": True, "maxContentChars": 500}
    env = {e["name"]: e for e in _env(tracing)}
    assert env["SWARMKIT_TRACE_CONTENT_CHARS"]["value"] == "500"
    with pytest.raises(ValidationError, match="less than or equal to 65536"):
        WorkspaceSpec.model_validate({"tracing": {"endpoint": ENDPOINT, "maxContentChars": 10**6}})


def test_no_tracing_no_env() -> None:
    names = {e["name"] for e in _env(None)}
    assert not {n for n in names if n.startswith("OTEL_") or n in ("TRACEPARENT",)}


@pytest.mark.parametrize(
    ("endpoint", "fragment"),
    [
        ("otel-collector:4318", "must be an http(s) URL with a host"),
        ("grpc://collector:4317", "must be an http(s) URL with a host"),
        ("http://", "must be an http(s) URL with a host"),
    ],
)
def test_a_bad_endpoint_is_refused_naming_the_field(endpoint: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        WorkspaceSpec.model_validate({"tracing": {"endpoint": endpoint}})
    assert fragment in str(info.value) and "tracing.endpoint" in str(info.value)


def test_the_endpoint_is_a_declared_destination() -> None:
    ws = WorkspaceSpec.model_validate({"tracing": {"endpoint": ENDPOINT}})
    [found] = [e for e in declared_endpoints(ws, []) if e.kind == "tracing"]
    assert (found.host, found.port) == ("otel-collector.observability", 4318)


def test_the_operator_exports_only_with_an_endpoint() -> None:
    assert not exporting({})
    assert exporting({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert not exporting({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"})


def test_a_served_topology_samples_uncalled_traces_at_the_ratio_and_follows_callers() -> None:
    ws = WorkspaceSpec.model_validate({"tracing": {"endpoint": ENDPOINT, "samplingRatio": 0.1}})
    env = {e["name"]: e.get("value") for e in serving_env(ws.tracing)}
    assert env["OTEL_TRACES_SAMPLER"] == "parentbased_traceidratio"
    assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.1"
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == ENDPOINT
    assert "TRACEPARENT" not in env  # each call brings its own
    assert serving_env(None) == []


def test_the_mcp_gateway_deployment_gets_the_exporter_env_by_reference() -> None:
    from .test_gateway_builder import gateway_spec, manifests, rendered

    render = rendered()
    traced_ws = render.bundle.workspace.model_copy(
        update={
            "tracing": TracingSpec.model_validate(
                {"endpoint": ENDPOINT, "headersSecretRef": {"name": "otlp", "key": "h"}}
            )
        }
    )
    render = dataclasses.replace(
        render, bundle=render.bundle.model_copy(update={"workspace": traced_ws})
    )
    _, deployment, _ = manifests(gateway_spec(), render)
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == ENDPOINT
    assert env["OTEL_EXPORTER_OTLP_HEADERS"]["valueFrom"]["secretKeyRef"] == {
        "name": "otlp",
        "key": "h",
    }
    assert env["OTEL_TRACES_SAMPLER"]["value"] == "parentbased_traceidratio"
