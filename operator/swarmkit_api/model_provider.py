"""A Workspace's model providers: which model API the runner calls and how it signs in.

The rules the APIs themselves enforce per model family (parameter names, temperature
ranges) are in :mod:`.model_rules`; these are the provider settings and their own
cross-field rules.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import ApiModel, CelRule
from .common import KEBAB, SecretKeyRef
from .spend import ModelPrices


class AzureSettings(ApiModel):
    """How an azure-openai provider reaches its deployments (as the openai SDK's AzureOpenAI)."""

    api_version: str = Field(
        default="v1",
        pattern=r"^(v1|\d{4}-\d{2}-\d{2}(-preview)?)$",
        description="v1 (POST {baseUrl}/openai/v1/chat/completions, model = the deployment) "
        "or a dated version such as 2024-10-21 (POST {baseUrl}/openai/deployments/"
        "<deployment>/chat/completions?api-version=...).",
    )
    auth: Literal["api-key", "entra-token"] = Field(
        default="api-key",
        description="api-key: apiKey is sent as the api-key header; entra-token: apiKey holds "
        "a Microsoft Entra ID access token, sent as Authorization: Bearer.",
    )


class AwsSettings(ApiModel):
    """Where a bedrock provider calls Bedrock and how it signs in."""

    region: str = Field(
        pattern=r"^[a-z]{2}(-[a-z]+)+-\d$", description="AWS region, e.g. us-east-1."
    )
    auth: Literal["sigv4", "api-key"] = Field(
        default="sigv4",
        description="sigv4: apiKey holds AWS credentials as credential_process JSON "
        '({"Version": 1, "AccessKeyId", "SecretAccessKey", "SessionToken"}), requests are '
        "signed with Signature Version 4; api-key: apiKey is a Bedrock API key (Bearer).",
    )


class ModelProvider(ApiModel):
    """A model API the runner can call."""

    cel_rules = (
        CelRule(
            rule="self.type in ['openai', 'azure-openai'] || !has(self.maxTokensParameter) || "
            "self.maxTokensParameter == 'auto'",
            message="maxTokensParameter applies to openai and azure-openai providers only",
            field_path=".maxTokensParameter",
            check=lambda m: (
                m.type in ("openai", "azure-openai") or m.max_tokens_parameter == "auto"
            ),
        ),
        CelRule(
            rule="self.type != 'azure-openai' || has(self.baseUrl)",
            message="an azure-openai provider needs baseUrl (https://<resource>.openai.azure.com)",
            field_path=".baseUrl",
            check=lambda m: m.type != "azure-openai" or m.base_url is not None,
        ),
        CelRule(
            rule="(self.type == 'bedrock') == has(self.aws)",
            message="aws (region, auth) is required by bedrock providers and only by them",
            field_path=".aws",
            check=lambda m: (m.type == "bedrock") == (m.aws is not None),
        ),
        CelRule(
            rule="self.type != 'bedrock' || !has(self.streaming) || self.streaming != 'always'",
            message="bedrock providers do not stream (ConverseStream is not server-sent events)",
            field_path=".streaming",
            check=lambda m: m.type != "bedrock" or m.streaming != "always",
        ),
        CelRule(
            rule="!has(self.azure) || self.type == 'azure-openai'",
            message="azure applies to azure-openai providers only",
            field_path=".azure",
            check=lambda m: m.azure is None or m.type == "azure-openai",
        ),
    )

    name: str = Field(pattern=KEBAB, max_length=63, description="Provider name agents use.")
    type: Literal["anthropic", "openai", "azure-openai", "gemini", "bedrock", "replay"] = Field(
        description="anthropic (Messages API), openai (Chat Completions, also vLLM, Ollama, "
        "LiteLLM), azure-openai (Chat Completions on Azure: model = the deployment name), "
        "gemini (Google's native generateContent), bedrock (AWS Bedrock's Converse API: model "
        "= the model or inference profile id) or replay (scripted turns from the Agent spec; "
        "no API)."
    )
    base_url: str | None = Field(
        default=None, pattern=r"^https?://", description="API base URL; defaults per type."
    )
    api_key: SecretKeyRef | None = Field(default=None, description="Secret key with the API key.")
    default_model: str | None = Field(default=None, description="Model used when none is named.")
    max_retries: int = Field(default=3, ge=0, le=10, description="Retries on 429/5xx/timeouts.")
    timeout_seconds: int = Field(
        default=120,
        ge=1,
        le=3600,
        description="Request timeout (streamed: the longest silence between two events).",
    )
    streaming: Literal["auto", "always", "never"] = Field(
        default="auto",
        description="Stream answers (server-sent events): auto streams a turn whose maxTokens "
        "could take longer than timeoutSeconds at 128,000 tokens/hour (the official SDKs' "
        "planning rate).",
    )
    aws: AwsSettings | None = Field(default=None, description="bedrock: region and sign-in.")
    azure: AzureSettings | None = Field(
        default=None, description="azure-openai: API version and how apiKey is sent."
    )
    prices: ModelPrices | None = Field(
        default=None,
        description="What its models cost per million tokens; without it a Run's cost is "
        "reported as unknown (never 0) and a maxCost cap cannot admit its calls.",
    )
    max_tokens_parameter: Literal["auto", "max_tokens", "max_completion_tokens"] = Field(
        default="auto",
        description="openai, azure-openai: the request field of the token limit; auto = "
        "max_completion_tokens for o-series/gpt-5 models, api.openai.com and Azure, max_tokens "
        "for other servers.",
    )


__all__ = ["AwsSettings", "AzureSettings", "ModelProvider"]
