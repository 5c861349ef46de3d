"""Azure OpenAI (``type: azure-openai``) against the scripted model server at Azure's paths,
checked against what the official ``openai`` SDK's ``AzureOpenAI`` client sends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from swarmkit_api import ManifestError, validate_spec
from swarmkit_api.bundle import secret_env_name
from swarmkit_api.workspace import ModelProvider
from tests.support.bundles import agent, bundle, secret_ref, write_bundle
from tests.support.model_server import ScriptedModelServer, text
from tests.support.runner import run_in_process

KEY = "azure-key-4f1d2c"


def azure(server: ScriptedModelServer, **azure_settings: Any) -> ModelProvider:
    return ModelProvider.model_validate(
        {
            "name": "az",
            "type": "azure-openai",
            "baseUrl": server.url,
            "apiKey": {"name": "azure", "key": "key"},
            "azure": azure_settings,
        }
    )


async def run(tmp_path: Path, prov: ModelProvider) -> Any:
    b = bundle(agents=[agent("solo", provider="az", model="my-gpt4o-deployment")], providers=[prov])
    env = {secret_env_name(secret_ref("azure", "key")): KEY}
    return await run_in_process(b, write_bundle(b, tmp_path), env)


@pytest.mark.parametrize(
    ("settings", "path", "query"),
    [
        ({}, "/openai/v1/chat/completions", {}),
        (
            {"apiVersion": "2024-10-21"},
            "/openai/deployments/my-gpt4o-deployment/chat/completions",
            {"api-version": "2024-10-21"},
        ),
    ],
)
async def test_an_azure_deployment_is_called_where_the_sdk_calls_it(
    settings: dict[str, Any],
    path: str,
    query: dict[str, str],
    tmp_path: Path,
    model_server: ScriptedModelServer,
) -> None:
    model_server.api_key = KEY
    model_server.push(text("from azure"))
    out = await run(tmp_path, azure(model_server, **settings))
    assert out.outcome == "Succeeded", out.result["message"]
    (request,) = model_server.requests
    assert (request.path, request.query) == (path, query)
    assert request.headers["api-key"] == KEY and "authorization" not in request.headers
    assert request.body["model"] == "my-gpt4o-deployment"
    assert request.body["max_completion_tokens"] == 1024 and "max_tokens" not in request.body
    # the official SDK's AzureOpenAI client goes to the same place with the same header
    client = openai.AzureOpenAI(
        azure_endpoint=model_server.url,
        api_key=KEY,
        api_version=settings.get("apiVersion", "v1"),
        max_retries=0,
    )
    if "apiVersion" in settings:
        client.chat.completions.create(
            model="my-gpt4o-deployment",
            messages=[{"role": "user", "content": "hi"}],
            max_completion_tokens=5,
        )
        sdk = model_server.requests[-1]
        assert (sdk.path, sdk.query) == (request.path, request.query)
        assert sdk.headers["api-key"] == KEY


async def test_an_entra_token_is_sent_as_a_bearer_token(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.api_key = KEY
    out = await run(tmp_path, azure(model_server, auth="entra-token"))
    assert out.outcome == "Succeeded", out.result["message"]
    headers = model_server.requests[0].headers
    assert headers["authorization"] == f"Bearer {KEY}" and "api-key" not in headers
    assert KEY not in out.stdout


def test_an_azure_provider_needs_its_endpoint_and_azure_fits_only_azure() -> None:
    def workspace(provider: dict[str, Any]) -> None:
        validate_spec("Workspace", {"modelProviders": [provider]})

    with pytest.raises(ManifestError, match="needs baseUrl"):
        workspace({"name": "az", "type": "azure-openai"})
    with pytest.raises(ManifestError, match="azure applies to azure-openai providers only"):
        workspace({"name": "o", "type": "openai", "azure": {"apiVersion": "v1"}})
    with pytest.raises(ManifestError):
        workspace(
            {
                "name": "az",
                "type": "azure-openai",
                "baseUrl": "https://x",
                "azure": {"apiVersion": "latest"},
            }
        )
