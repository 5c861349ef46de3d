"""What the model APIs refuse, per provider type and model family (pure; no I/O).

One place for the rules the Agent CRD's CEL, the operator's ``Accepted`` verdict and the
runner all apply, so an Agent the real API would refuse is never Ready:

* OpenAI reasoning models (``o1``/``o3``/``o4``… and ``gpt-5``…) take ``max_completion_tokens``
  (``max_tokens`` is answered 400 "Unsupported parameter") and only the default temperature.
* Anthropic's Messages API, at the version the runner (and the official SDK since 2.0)
  sends (``anthropic-version: 2026-10-21``), takes no sampling parameters at all:
  ``temperature`` is a 400 ("Extra inputs are not permitted") at any value. Claude models
  behind an OpenAI-compatible gateway are held to the range older API versions took (0 to 1),
  and so is every model behind AWS Bedrock's Converse API (its service model says 0 to 1).
"""

from __future__ import annotations

import re

#: Model names of OpenAI's reasoning families (also as the CEL regex of the Agent CRD).
OPENAI_REASONING_PATTERN = r"^(o[1-9]|gpt-5)"
#: Model names of Claude models, whatever gateway serves them (Bedrock: anthropic.claude-…).
CLAUDE_PATTERN = r"claude"
OPENAI_TEMPERATURE_MAX = 2.0
CLAUDE_TEMPERATURE_MAX = 1.0
OPENAI_DEFAULT_BASE = "https://api.openai.com"


def openai_reasoning(model: str | None) -> bool:
    """Whether ``model`` is an OpenAI reasoning model (o-series, gpt-5 family)."""
    return bool(model) and re.search(OPENAI_REASONING_PATTERN, model or "") is not None


def claude(model: str | None) -> bool:
    return bool(model) and re.search(CLAUDE_PATTERN, model or "") is not None


def temperature_problem(provider_type: str, model: str | None, temperature: float | None) -> str:
    """Why ``temperature`` would be refused by ``provider_type`` serving ``model`` ('' = fine)."""
    if temperature is None or provider_type == "replay":
        return ""
    if provider_type == "anthropic":
        return (
            "the Anthropic Messages API (version 2026-10-21) takes no sampling temperature; "
            f"unset spec.model.temperature (it is {temperature:g})"
        )
    if openai_reasoning(model):  # openai, azure-openai and gateways serving them
        return (
            f"model {model} (an OpenAI reasoning model) takes only the default temperature; "
            f"unset spec.model.temperature (it is {temperature:g})"
        )
    limit = OPENAI_TEMPERATURE_MAX
    if claude(model) or provider_type == "bedrock":  # Converse's service model: 0 to 1
        limit = CLAUDE_TEMPERATURE_MAX
    if temperature > limit:
        return f"temperature {temperature:g} is out of range for model {model} (0 to {limit:g})"
    return ""


def max_tokens_parameter(
    setting: str, base_url: str | None, model: str, provider_type: str = "openai"
) -> str:
    """The Chat Completions field that carries the output token limit.

    ``auto``: ``max_completion_tokens`` for reasoning models, for OpenAI's own API (where
    ``max_tokens`` is deprecated) and for Azure (deployment names need not name the model;
    every current Azure API version takes it); ``max_tokens`` for other OpenAI-compatible
    servers, which have known it longest (vLLM, Ollama, most gateways).
    """
    if setting != "auto":
        return setting
    if (
        provider_type == "azure-openai"
        or openai_reasoning(model)
        or (base_url or OPENAI_DEFAULT_BASE).startswith(OPENAI_DEFAULT_BASE)
    ):
        return "max_completion_tokens"
    return "max_tokens"
