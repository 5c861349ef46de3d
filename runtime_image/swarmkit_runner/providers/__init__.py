"""Model providers: Anthropic Messages, OpenAI-compatible Chat Completions (also on Azure),
Gemini (native generateContent), AWS Bedrock (Converse, SigV4), replay."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from swarmkit_api.agent import ReplayTurn
from swarmkit_api.bundle import BundleAgent
from swarmkit_api.workspace import AzureSettings, ModelProvider

from ..errors import ModelError
from ..secrets import SecretStore
from . import bedrock
from .anthropic import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from .anthropic import AnthropicProvider
from .azure import AzureOpenAIProvider, azure_headers
from .base import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    Provider,
    RetryHook,
    ToolCall,
    ToolDef,
    ToolResultItem,
    ToolResults,
    Usage,
    UserMessage,
)
from .gemini import DEFAULT_BASE_URL as GEMINI_BASE_URL
from .gemini import GeminiProvider
from .openai import DEFAULT_BASE_URL as OPENAI_BASE_URL
from .openai import OpenAIProvider
from .replay import ReplayProvider

__all__ = [
    "AssistantMessage",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ProviderPool",
    "ToolCall",
    "ToolDef",
    "ToolResultItem",
    "ToolResults",
    "Usage",
    "UserMessage",
    "make_provider",
    "make_provider_for",
]


def make_provider(
    config: ModelProvider,
    agent: BundleAgent,
    secrets: SecretStore,
    on_retry: RetryHook | None = None,
) -> Provider:
    """The provider for ``agent`` (the key, if any, comes from the env the Job sets)."""
    model = (agent.spec.model.name if agent.spec.model else None) or config.default_model or ""
    return make_provider_for(config, model, agent.spec.replay, secrets, on_retry)


def make_provider_for(
    config: ModelProvider,
    model: str,
    replay: Sequence[ReplayTurn],
    secrets: SecretStore,
    on_retry: RetryHook | None = None,
) -> Provider:
    """The provider ``config`` talking to ``model`` (replay plays ``replay``)."""
    if config.type == "replay":
        return ReplayProvider(config.name, list(replay))
    api_key = secrets.get(config.api_key) if config.api_key is not None else None
    if config.type == "anthropic":
        return AnthropicProvider(
            config,
            model,
            config.base_url or ANTHROPIC_BASE_URL,
            AnthropicProvider.headers(api_key),
            secrets,
            on_retry,
        )
    if config.type == "bedrock":
        assert config.aws is not None  # the API requires it
        provider = bedrock.BedrockProvider(
            config,
            model,
            config.base_url or bedrock.base_url(config.aws.region),
            bedrock.BedrockProvider.headers(api_key, config.aws.auth),
            secrets,
            on_retry,
        )
        try:
            provider.configure(api_key, config.aws.region, config.aws.auth)
        except ValueError as exc:
            raise ModelError(f"model provider {config.name}: {exc}") from None
        return provider
    if config.type == "gemini":
        return GeminiProvider(
            config,
            model,
            config.base_url or GEMINI_BASE_URL,
            GeminiProvider.headers(api_key),
            secrets,
            on_retry,
        )
    if config.type == "azure-openai":
        return AzureOpenAIProvider(
            config,
            model,
            config.base_url or "",
            azure_headers(api_key, config.azure or AzureSettings()),
            secrets,
            on_retry,
        )
    return OpenAIProvider(
        config,
        model,
        config.base_url or OPENAI_BASE_URL,
        OpenAIProvider.headers(api_key),
        secrets,
        on_retry,
    )


class ProviderPool:
    """One HTTP provider per (provider, model) for the whole run, child runs included.

    Replay providers are never pooled: each invocation plays its script from the start.
    """

    def __init__(self, secrets: SecretStore) -> None:
        self._secrets = secrets
        self._http: dict[str, Provider] = {}

    def get(
        self,
        config: ModelProvider,
        model: str,
        replay: Sequence[ReplayTurn] = (),
        retry_hook: Callable[[ModelProvider, str], RetryHook] | None = None,
    ) -> Provider:
        if config.type == "replay":
            return make_provider_for(config, model, replay, self._secrets)
        key = f"{config.name}/{model}"
        if key not in self._http:
            hook = retry_hook(config, model) if retry_hook is not None else None
            self._http[key] = make_provider_for(config, model, (), self._secrets, hook)
        return self._http[key]

    async def aclose(self) -> None:
        for provider in self._http.values():
            await provider.aclose()
        self._http.clear()
