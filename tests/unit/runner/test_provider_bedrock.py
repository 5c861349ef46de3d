"""AWS Bedrock (``type: bedrock``, the Converse API) against the scripted model server, with
botocore as the judge (tests/support/aws.py): every request's SigV4 signature must be the one
botocore's ``SigV4Auth`` computes, and every body must pass botocore's ``ParamValidator``
against the ``Converse`` input shape of its ``bedrock-runtime`` service model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from swarmkit_api import ManifestError, validate_spec
from swarmkit_api.bundle import secret_env_name
from swarmkit_api.workspace import ModelProvider
from tests.support import aws
from tests.support.bundles import agent, bundle, secret_ref, write_bundle
from tests.support.model_contract import bedrock_rules
from tests.support.model_server import Reply, ScriptedModelServer, text
from tests.support.runner import RunOutput, run_in_process

pytestmark = pytest.mark.skipif(not aws.available(), reason="botocore missing: run make venv")

MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"  # the ':' is percent-encoded in the path
CREDENTIALS = {
    "Version": 1,
    "AccessKeyId": "AKIDEXAMPLE",
    "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
}


def bedrock(server: ScriptedModelServer, **aws_settings: Any) -> ModelProvider:
    return ModelProvider.model_validate(
        {
            "name": "br",
            "type": "bedrock",
            "baseUrl": server.url,
            "apiKey": {"name": "aws", "key": "credentials"},
            "aws": {"region": "eu-west-1", **aws_settings},
        }
    )


async def run(tmp_path: Path, prov: ModelProvider, secret: str, **kw: Any) -> RunOutput:
    b = bundle(
        agents=[agent("solo", provider="br", model=MODEL, flow_data_access=["n.txt"], **kw)],
        providers=[prov],
        workspace={"flowData": [{"path": "n.txt", "content": "hi"}]},
    )
    env = {secret_env_name(secret_ref("aws", "credentials")): secret}
    return await run_in_process(b, write_bundle(b, tmp_path), env)


@pytest.mark.parametrize("token", ["", "FwoGZXIvYXdzEXAMPLE//session+token="])
async def test_requests_are_signed_as_botocore_signs_them(
    token: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    creds = {**CREDENTIALS, "SessionToken": token} if token else CREDENTIALS
    model_server.aws_credentials = {k: str(v) for k, v in creds.items()}
    model_server.aws_region = "eu-west-1"
    model_server.push(
        Reply(text="Reading.", tool_calls=[("read_flow_data", {"path": "n.txt"})], input_tokens=12),
        text("The note says hi.", input_tokens=30, output_tokens=6),
    )
    out = await run(tmp_path, bedrock(model_server), json.dumps(creds))
    assert out.outcome == "Succeeded", out.result["message"]
    assert model_server.refused == []
    usage = out.result["usage"]
    assert {k: usage[k] for k in ("inputTokens", "outputTokens")} == {
        "inputTokens": 42,
        "outputTokens": 11,
    }
    assert usage["costUnknown"] is True  # the provider has no prices
    first, second = model_server.requests
    assert first.path == "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    assert first.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert ("x-amz-security-token" in first.headers) is bool(token)
    assert first.body["inferenceConfig"] == {"maxTokens": 1024}
    assert "read_flow_data" in first.tools
    assert second.tool_results() == [("hi", False)]
    assert CREDENTIALS["SecretAccessKey"] not in out.stdout


async def test_a_wrong_secret_is_refused_by_the_signature_check(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.aws_credentials = {**CREDENTIALS, "SecretAccessKey": "another-secret"}  # type: ignore[dict-item]
    model_server.aws_region = "eu-west-1"
    out = await run(tmp_path, bedrock(model_server), json.dumps(CREDENTIALS))
    assert out.outcome == "Failed"
    assert "HTTP 403" in out.result["message"]
    assert "signature we calculated does not match" in out.result["message"]


async def test_a_bedrock_api_key_is_a_bearer_token(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.api_key = "ABSKbedrock-api-key"
    out = await run(tmp_path, bedrock(model_server, auth="api-key"), "ABSKbedrock-api-key")
    assert out.outcome == "Succeeded", out.result["message"]
    assert model_server.requests[0].headers["authorization"] == "Bearer ABSKbedrock-api-key"


async def test_credentials_that_are_not_credential_process_json_fail_clearly(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    out = await run(tmp_path, bedrock(model_server), "AKID:secret")
    assert out.outcome == "Failed"
    assert "the AWS credentials are not credential_process JSON" in out.result["message"]
    assert model_server.requests == []


async def test_an_empty_answer_re_asked_keeps_the_roles_alternating(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(text(""), text('{"x": 1}'))
    schema = {"type": "object", "required": ["x"]}
    out = await run(tmp_path, bedrock(model_server, auth="api-key"), "k", outputSchema=schema)
    assert out.outcome == "Succeeded", out.result["message"]
    assert model_server.refused == []
    assert [m["role"] for m in model_server.requests[1].messages] == ["user"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(text="half", truncate=True), "Truncated: agent solo's answer was cut off"),
        (Reply(text="Blocked.", refusal=""), "the model refused (stopReason guardrail_intervened)"),
    ],
)
async def test_truncation_and_guardrails_are_failures(
    reply: Reply, expected: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(reply)
    out = await run(tmp_path, bedrock(model_server, auth="api-key"), "k")
    failed = "Truncated" if expected.startswith("Truncated:") else "Failed"
    assert out.outcome == failed and expected in out.result["message"]


def test_botocore_refuses_what_converse_refuses() -> None:
    ok = {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}
    assert aws.judge(model_id="m", body=ok) == ([], None)
    problems, _ = aws.judge(
        model_id="m", body={**ok, "inferenceConfig": {"maxTokens": 5, "temperature": 1.5}}
    )
    assert problems == ["body.inferenceConfig.temperature: 1.5 is above the maximum 1"]
    problems, _ = aws.judge(model_id="m", body={**ok, "max_tokens": 5})
    assert any("max_tokens" in p for p in problems), problems
    assert bedrock_rules(
        {
            "messages": [
                {"role": "user", "content": [{"text": "a"}]},
                {"role": "user", "content": [{"text": " "}]},
            ]
        }
    ) == [
        "A conversation must alternate between user and assistant roles.",
        "The text field in the ContentBlock object at messages.1.content.0 is blank. Add text "
        "to the text field, and try again.",
    ]


def test_a_bedrock_provider_needs_its_region_and_does_not_stream() -> None:
    def workspace(provider: dict[str, Any]) -> None:
        validate_spec("Workspace", {"modelProviders": [provider]})

    with pytest.raises(ManifestError, match=r"aws \(region, auth\) is required"):
        workspace({"name": "b", "type": "bedrock"})
    with pytest.raises(ManifestError, match="do not stream"):
        workspace(
            {"name": "b", "type": "bedrock", "aws": {"region": "us-east-1"}, "streaming": "always"}
        )
    with pytest.raises(ManifestError):
        workspace({"name": "b", "type": "bedrock", "aws": {"region": "Frankfurt"}})
