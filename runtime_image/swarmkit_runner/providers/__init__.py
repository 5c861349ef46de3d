"""Model providers: Anthropic Messages, OpenAI-compatible Chat Completions, replay."""

from __future__ import annotations

from swarmkit_api.bundle import BundleAgent
from swarmkit_api.workspace import ModelProvider

from ..secrets import SecretStore
from .anthropic import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from .anthropic import AnthropicProvider
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
from .openai import DEFAULT_BASE_URL as OPENAI_BASE_URL
from .openai import OpenAIProvider
from .replay import ReplayProvider

__all__ = [
    "AssistantMessage",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ToolCall",
    "ToolDef",
    "ToolResultItem",
    "ToolResults",
    "Usage",
    "UserMessage",
    "make_provider",
]


def make_provider(
    config: ModelProvider,
    agent: BundleAgent,
    secrets: SecretStore,
    on_retry: RetryHook | None = None,
) -> Provider:
    """The provider for ``agent`` (the key, if any, comes from the env the Job sets)."""
    if config.type == "replay":
        return ReplayProvider(config.name, agent.spec.replay)
    api_key = secrets.get(config.api_key) if config.api_key is not None else None
    model = (agent.spec.model.name if agent.spec.model else None) or config.default_model or ""
    if config.type == "anthropic":
        return AnthropicProvider(
            config.name,
            model,
            config.base_url or ANTHROPIC_BASE_URL,
            AnthropicProvider.headers(api_key),
            config.timeout_seconds,
            config.max_retries,
            secrets,
            on_retry,
        )
    return OpenAIProvider(
        config.name,
        model,
        config.base_url or OPENAI_BASE_URL,
        OpenAIProvider.headers(api_key),
        config.timeout_seconds,
        config.max_retries,
        secrets,
        on_retry,
    )
