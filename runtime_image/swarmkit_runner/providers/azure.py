"""Azure OpenAI: Chat Completions on an Azure resource, addressed as the ``openai`` SDK's
``AzureOpenAI`` client addresses it.

* ``azure.apiVersion: v1`` (the default; Azure's current GA data plane):
  ``POST {baseUrl}/openai/v1/chat/completions`` with ``model`` = the deployment name.
* A dated version (``2024-10-21``, ``2025-04-01-preview``):
  ``POST {baseUrl}/openai/deployments/{deployment}/chat/completions?api-version=…``.
* ``azure.auth: api-key`` sends the Secret's value as the ``api-key`` header;
  ``entra-token`` sends it as ``Authorization: Bearer`` (a Microsoft Entra ID access token
  that something else keeps fresh in the Secret; the runner reads it once, at start).

The body, the answers and streaming are the Chat Completions ones (:mod:`.openai`); the token
limit goes in ``max_completion_tokens`` (a deployment's name need not say which model it is).
"""

from __future__ import annotations

from urllib.parse import quote

from swarmkit_api.workspace import AzureSettings

from .openai import OpenAIProvider


def azure_headers(api_key: str | None, settings: AzureSettings) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    if api_key:
        if settings.auth == "entra-token":
            headers["authorization"] = f"Bearer {api_key}"
        else:
            headers["api-key"] = api_key
    return headers


class AzureOpenAIProvider(OpenAIProvider):
    type = "azure-openai"

    def endpoint(self) -> str:
        settings = self.config.azure or AzureSettings()
        base = self.base_url.removesuffix("/openai")
        if settings.api_version == "v1":
            return f"{base}/openai/v1/chat/completions"
        deployment = quote(self.model, safe="")
        return (
            f"{base}/openai/deployments/{deployment}/chat/completions"
            f"?api-version={settings.api_version}"
        )
