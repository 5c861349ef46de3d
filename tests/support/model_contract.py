"""What the real model APIs refuse, checked on every request the scripted model server gets.

Two layers, both from sources nobody here wrote (Gemini's generateContent is checked with
the ``google-genai`` SDK's own pydantic types: :func:`gemini_problems`):

* **The official SDKs' request types** (the ``openai`` and ``anthropic`` PyPI packages, test
  dependencies only): the body must match ``openai.types.chat.completion_create_params``,
  ``openai.types.responses.response_create_params`` (the Responses API) or
  ``anthropic.types.message_create_params`` exactly, walked field by field from the
  TypedDicts' own annotations: required keys present, no key the type does not declare
  (both APIs answer 400 to an unknown parameter), literals, unions, lists and scalars.
* **The documented rules the types cannot say** (each with the API's own error text where
  it is documented): OpenAI reasoning models refuse ``max_tokens`` and any temperature but
  the default, ``temperature`` is 0-2, an assistant message needs ``content`` or
  ``tool_calls``, every tool call is answered by a ``tool`` message right after it;
  Anthropic's temperature is 0-1, text blocks must hold non-whitespace text, only the last
  message may be an empty assistant turn and a final assistant turn must not end in
  whitespace, every ``tool_result`` answers a ``tool_use`` of the turn before; the Responses
  API wants a model, refuses sampling knobs on reasoning models and ``max_output_tokens``
  under 16, and pairs every ``function_call_output`` with a ``function_call`` by ``call_id``.

:func:`check` returns the problems (empty when the real API would accept the body).
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import typing_extensions as te

Wire = Literal["anthropic", "openai", "responses", "gemini", "bedrock"]
#: The wires judged by an official SDK's TypedDict request types.
SdkWire = Literal["anthropic", "openai", "responses"]
REASONING = re.compile(r"^(o[1-9]|gpt-5)")
_MAX_PROBLEMS = 8


@functools.cache
def _request_type(wire: SdkWire, stream: bool, beta: bool = False) -> Any:
    if wire == "responses":
        from openai.types.responses import response_create_params as rparams

        return (
            rparams.ResponseCreateParamsStreaming
            if stream
            else rparams.ResponseCreateParamsNonStreaming
        )
    if wire == "openai":
        from openai.types.chat import completion_create_params as oparams

        return (
            oparams.CompletionCreateParamsStreaming
            if stream
            else oparams.CompletionCreateParamsNonStreaming
        )
    if beta:  # an ``anthropic-beta`` header: the API takes the beta parameters too
        from anthropic.types.beta import message_create_params as bparams

        return (
            bparams.MessageCreateParamsStreaming
            if stream
            else bparams.MessageCreateParamsNonStreaming
        )
    from anthropic.types import message_create_params as aparams

    return (
        aparams.MessageCreateParamsStreaming if stream else aparams.MessageCreateParamsNonStreaming
    )


@functools.cache
def _fields(cls: Any) -> dict[str, tuple[Any, bool, str]]:
    """Wire key → (type, required, python key) of a TypedDict (aliases honoured)."""
    hints = te.get_type_hints(cls, include_extras=True)
    out: dict[str, tuple[Any, bool, str]] = {}
    for key, hint in hints.items():
        required = _declared_total(cls, key)
        alias = key
        while True:
            origin = te.get_origin(hint)
            if origin is te.Annotated:
                for meta in hint.__metadata__:
                    alias = getattr(meta, "alias", None) or alias
                hint = te.get_args(hint)[0]
            elif origin in (te.Required, typing.Required):
                required, hint = True, te.get_args(hint)[0]
            elif origin in (te.NotRequired, typing.NotRequired):
                required, hint = False, te.get_args(hint)[0]
            else:
                break
        out[alias] = (hint, required, key)
    return out


def _declared_total(cls: Any, key: str) -> bool:
    """Whether ``key`` is required by the totality of the class that first declares it
    (a TypedDict's ``__annotations__`` repeat every inherited key)."""
    for klass in reversed(_typeddict_mro(cls)):
        if key in inspect.get_annotations(klass):
            return bool(getattr(klass, "__total__", True))
    return True


def _typeddict_mro(cls: Any) -> list[Any]:
    seen: list[Any] = [cls]
    for base in getattr(cls, "__orig_bases__", ()):
        if te.is_typeddict(base):
            seen.extend(_typeddict_mro(base))
    return seen


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


def _walk(value: Any, tp: Any, path: str) -> list[str]:
    """Problems of ``value`` against the SDK type ``tp`` (empty = it matches)."""
    if tp is Any or tp is object:
        return []
    origin = te.get_origin(tp)
    args = te.get_args(tp)
    if origin is te.Annotated:
        return _walk(value, args[0], path)
    if origin in (typing.Union, types.UnionType):
        tried = []
        for option in args:
            problems = _walk(value, option, path)
            if not problems:
                return []
            tried.append(problems)
        # Report the option that came closest: fewest problems, then the deepest one (the
        # object with one unknown field, not "expected a string").
        tried.sort(key=lambda ps: (len(ps), -max(len(p.split(":")[0]) for p in ps)))
        return tried[0] if tried else [f"{path}: no type of the union matches"]
    if origin in (Literal, te.Literal):
        return [] if value in args else [f"{path}: {value!r} is not one of {list(args)}"]
    if tp is type(None):
        return [] if value is None else [f"{path}: expected null"]
    if te.is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: expected an object ({_name(tp)})"]
        fields = _fields(tp)
        problems = [
            f"{path}.{key}: unknown field (not in {_name(tp)})"
            for key in value
            if key not in fields
        ]
        for key, (hint, required, _) in fields.items():
            if key in value:
                problems += _walk(value[key], hint, f"{path}.{key}")
            elif required:
                problems.append(f"{path}.{key}: field required ({_name(tp)})")
        return problems
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, dict):
            return [f"{path}: expected an object"]
        if len(args) == 2:
            return [p for k, v in value.items() for p in _walk(v, args[1], f"{path}.{k}")]
        return []
    if origin is not None and _is_sequence(origin):
        if not isinstance(value, list):
            return [f"{path}: expected an array"]
        item = args[0] if args else Any
        return [p for i, v in enumerate(value) for p in _walk(v, item, f"{path}[{i}]")]
    if tp is str:
        return [] if isinstance(value, str) else [f"{path}: expected a string"]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected a boolean"]
    if tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected an integer"]
    if tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected a number"]
    if isinstance(tp, type) and hasattr(tp, "model_fields"):
        return [f"{path}: a response object type, not a request body"]
    if isinstance(tp, type) and issubclass(tp, str) and hasattr(tp, "__members__"):
        return [] if value in {m.value for m in tp.__members__.values()} else [f"{path}: bad value"]
    return []  # a type the request bodies here never use (files, binary): not judged


def _is_sequence(origin: Any) -> bool:
    if origin in (list, Sequence, Iterable, tuple):
        return True
    return getattr(origin, "__name__", "") == "SequenceNotStr"


def sdk_problems(wire: SdkWire, body: dict[str, Any], beta: bool = False) -> list[str]:
    """The body against the official SDK's request type (streaming or not, by ``stream``;
    Anthropic's beta request type when the request named a beta)."""
    if wire == "responses":
        body = _responses_beyond_sdk(body)
    return _walk(body, _request_type(wire, body.get("stream") is True, beta), "body")


def _responses_beyond_sdk(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` less what the real Responses API accepts but the SDK's TypedDicts do not
    declare: OpenAI's own client (``codex exec``, which only talks to that API) sends a
    top-level ``client_metadata`` object of strings and an ``id`` on the input messages it
    replays. Only those two, and only in those shapes."""
    out = dict(body)
    metadata = out.get("client_metadata")
    if isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values()):
        del out["client_metadata"]
    items = out.get("input")
    if isinstance(items, list):
        out["input"] = [
            {k: v for k, v in item.items() if k != "id"}
            if isinstance(item, dict)
            and item.get("type") == "message"
            and isinstance(item.get("id"), str)
            else item
            for item in items
        ]
    return out


def openai_rules(body: dict[str, Any]) -> list[str]:
    """OpenAI's documented rules beyond the types (messages as the API words them)."""
    problems: list[str] = []
    model = str(body.get("model") or "")
    reasoning = REASONING.search(model) is not None
    if reasoning and "max_tokens" in body:
        problems.append(
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead."
        )
    if "max_tokens" in body and "max_completion_tokens" in body:
        problems.append("max_tokens and max_completion_tokens are mutually exclusive")
    temperature = body.get("temperature")
    if temperature is not None:
        if reasoning and temperature != 1:
            problems.append(
                "Unsupported value: 'temperature' does not support "
                f"{temperature} with this model. Only the default (1) value is supported."
            )
        if not 0 <= temperature <= 2:
            problems.append(f"Invalid 'temperature': {temperature} is not in [0, 2]")
    if "stream_options" in body and body.get("stream") is not True:
        problems.append("The 'stream_options' parameter is only allowed when 'stream' is true")
    messages = list(body.get("messages") or [])
    if not messages:
        problems.append("Invalid 'messages': empty array. Expected at least 1 message.")
    pending: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if role == "tool":
            if msg.get("tool_call_id") not in pending:
                problems.append(
                    f"Invalid parameter: messages[{i}]: messages with role 'tool' must be a "
                    "response to a preceeding message with 'tool_calls'."
                )
            pending.discard(str(msg.get("tool_call_id")))
            continue
        if pending:
            problems.append(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. (missing: {sorted(pending)})"
            )
            pending = set()
        if role == "assistant":
            calls = msg.get("tool_calls") or []
            if msg.get("content") is None and not calls:
                problems.append(
                    f"Invalid value for 'content' of messages[{i}]: expected a string, got null."
                )
            pending = {str(c.get("id")) for c in calls}
    if pending:
        problems.append(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id'. (missing: {sorted(pending)})"
        )
    return problems


def responses_rules(body: dict[str, Any]) -> list[str]:
    """The Responses API's documented rules beyond the types (its own error texts)."""
    problems: list[str] = []
    model = str(body.get("model") or "")
    if not model:
        problems.append("Missing required parameter: 'model'.")
    reasoning = REASONING.search(model) is not None
    for knob in ("temperature", "top_p"):
        if reasoning and body.get(knob) is not None:
            problems.append(f"Unsupported parameter: '{knob}' is not supported with this model.")
    temperature = body.get("temperature")
    if isinstance(temperature, int | float) and not 0 <= temperature <= 2:
        problems.append(f"Invalid 'temperature': {temperature} is not in [0, 2]")
    limit = body.get("max_output_tokens")
    if isinstance(limit, int) and limit < 16:
        problems.append(
            "Invalid 'max_output_tokens': integer below minimum value. "
            f"Expected a value >= 16, but got {limit} instead."
        )
    if "stream_options" in body and body.get("stream") is not True:
        problems.append("The 'stream_options' parameter is only allowed when 'stream' is true")
    if body.get("previous_response_id"):  # this server keeps no responses
        problems.append(f"Previous response with id '{body['previous_response_id']}' not found.")
    for i, tool in enumerate(body.get("tools") or []):
        name = tool.get("name") if isinstance(tool, dict) else None
        if name is not None and not re.fullmatch(r"[a-zA-Z0-9_-]{1,128}", str(name)):
            problems.append(
                f"Invalid 'tools[{i}].name': string does not match pattern. Expected a "
                "string that matches the pattern '^[a-zA-Z0-9_-]+$'."
            )
    items = body.get("input")
    return problems + _responses_call_pairs(items if isinstance(items, list) else [])


def _responses_call_pairs(items: list[Any]) -> list[str]:
    """Every function call output answers a call earlier in ``input``, and (without a stored
    previous response) every call in ``input`` has its output."""
    problems: list[str] = []
    calls: set[str] = set()
    answered: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        client_search = kind == "tool_search_call" and item.get("execution") == "client"
        if kind in ("function_call", "custom_tool_call") or client_search:
            calls.add(str(item.get("call_id")))
        elif kind in ("function_call_output", "custom_tool_call_output", "tool_search_output"):
            call_id = str(item.get("call_id"))
            if call_id not in calls:
                problems.append(
                    f"No tool call found for function call output with call_id {call_id}."
                )
            answered.add(call_id)
    for call_id in sorted(calls - answered):
        problems.append(f"No tool output found for function call {call_id}.")
    return problems


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def anthropic_rules(body: dict[str, Any]) -> list[str]:
    """Anthropic's documented rules beyond the types (messages as the API words them)."""
    problems: list[str] = []
    temperature = body.get("temperature")
    if temperature is not None and not 0 <= temperature <= 1:
        problems.append(f"temperature: Input should be less than or equal to 1 ({temperature})")
    if isinstance(body.get("max_tokens"), int) and body["max_tokens"] < 1:
        problems.append("max_tokens: Input should be greater than or equal to 1")
    messages = list(body.get("messages") or [])
    if not messages:
        problems.append("messages: at least one message is required")
    previous_uses: set[str] = set()
    for i, msg in enumerate(messages):
        last = i == len(messages) - 1
        blocks = _blocks(msg.get("content"))
        if not blocks and not (last and msg.get("role") == "assistant"):
            problems.append(
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        for j, block in enumerate(blocks):
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                problems.append(
                    f"messages.{i}.content.{j}: text content blocks must contain "
                    "non-whitespace text"
                )
            if block.get("type") == "tool_result" and block.get("tool_use_id") not in previous_uses:
                problems.append(
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                    "blocks. Each `tool_result` block must have a corresponding `tool_use` "
                    "block in the previous message."
                )
        if last and msg.get("role") == "assistant" and blocks:
            tail = blocks[-1]
            if (
                tail.get("type") == "text"
                and str(tail.get("text", "")) != str(tail.get("text", "")).rstrip()
            ):
                problems.append("final assistant content cannot end with trailing whitespace")
        previous_uses = (
            {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
            if msg.get("role") == "assistant"
            else set()
        )
    for tool in body.get("tools") or []:
        name = str(tool.get("name", "")) if isinstance(tool, dict) else ""
        if not re.fullmatch(r"[a-zA-Z0-9_-]{1,128}", name):
            problems.append(f"tools: name {name!r} does not match ^[a-zA-Z0-9_-]{{1,128}}$")
    return problems


def check(wire: Wire, body: dict[str, Any], beta: bool = False) -> list[str]:
    """Why the real API would refuse ``body`` (empty: it would accept it). ``beta``: the
    request carried an ``anthropic-beta`` header (Claude Code's do), so the beta parameters
    (``context_management``, ...) are part of the API it is checked against."""
    if wire == "gemini":
        return gemini_problems(body)[:_MAX_PROBLEMS]
    if wire == "bedrock":  # the service model's own checks need botocore: tests/support/aws
        return bedrock_rules(body)[:_MAX_PROBLEMS]
    problems = sdk_problems(wire, body, beta and wire == "anthropic")
    if wire == "responses":
        problems += responses_rules(body)
    else:
        problems += openai_rules(body) if wire == "openai" else anthropic_rules(body)
    return problems[:_MAX_PROBLEMS]


#: The top-level fields of a generateContent body, as the google-genai SDK writes them
#: (``models._GenerateContentParameters_to_mldev`` and ``_GenerateContentConfig_to_mldev``).
GEMINI_FIELDS = frozenset(
    {
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "generationConfig",
        "safetySettings",
        "cachedContent",
        "labels",
        "serviceTier",
    }
)


def gemini_problems(body: dict[str, Any]) -> list[str]:
    """A generateContent body against the google-genai SDK's types (``Content``, ``Tool``,
    ``GenerationConfig``: pydantic models that forbid unknown fields) and the documented
    function calling rules."""
    from google.genai import types as gtypes
    from pydantic import ValidationError

    problems = [f"body.{key}: unknown field" for key in body if key not in GEMINI_FIELDS]
    checks: list[tuple[str, Any, Any]] = [
        ("systemInstruction", gtypes.Content, body.get("systemInstruction"))
    ]
    checks += [
        (f"contents[{i}]", gtypes.Content, c) for i, c in enumerate(body.get("contents") or [])
    ]
    checks += [(f"tools[{i}]", gtypes.Tool, t) for i, t in enumerate(body.get("tools") or [])]
    checks.append(("generationConfig", gtypes.GenerationConfig, body.get("generationConfig")))
    for where, model, value in checks:
        if value is None:
            continue
        try:
            model.model_validate(value)
        except ValidationError as exc:
            problems += [
                f"{where}.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
            ]
    contents = list(body.get("contents") or [])
    if not contents:
        problems.append("* GenerateContentRequest.contents: contents is not specified")
    config = body.get("generationConfig") or {}
    temperature = config.get("temperature")
    if temperature is not None and not 0 <= temperature <= 2:
        problems.append(f"generationConfig.temperature: {temperature} is not in [0, 2]")
    previous: dict[str, Any] = {}
    for i, content in enumerate(contents):
        role = content.get("role")
        if role not in ("user", "model"):
            problems.append(f"contents[{i}].role: Please use a valid role: user, model.")
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        if not parts:
            problems.append(f"contents[{i}].parts: must not be empty")
        calls = [p for p in parts if "functionCall" in p]
        answers = [p for p in parts if "functionResponse" in p]
        earlier = [p for p in previous.get("parts") or [] if "functionCall" in p]
        if calls and previous and previous.get("role") != "user":
            problems.append(
                "Please ensure that function call turn comes immediately after a user turn or "
                "after a function response turn."
            )
        if answers and len(answers) != len(earlier):
            problems.append(
                "Please ensure that the number of function response parts is equal to the "
                "number of function call parts of the function call turn."
            )
        for p in parts:
            if "text" in p and not str(p["text"]):
                problems.append(f"contents[{i}]: a text part must not be empty")
        previous = content
    return problems


def bedrock_rules(body: dict[str, Any]) -> list[str]:
    """Converse's documented rules beyond its service model (ValidationException texts)."""
    problems: list[str] = []
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if messages and messages[0].get("role") != "user":
        problems.append("A conversation must start with a user message.")
    previous: dict[str, Any] = {}
    for i, msg in enumerate(messages):
        if previous and previous.get("role") == msg.get("role"):
            problems.append("A conversation must alternate between user and assistant roles.")
        blocks = [b for b in msg.get("content") or [] if isinstance(b, dict)]
        for j, block in enumerate(blocks):
            if "text" in block and not str(block["text"]).strip():
                problems.append(
                    f"The text field in the ContentBlock object at messages.{i}.content.{j} "
                    "is blank. Add text to the text field, and try again."
                )
        uses = {
            str(b["toolUse"].get("toolUseId"))
            for b in previous.get("content") or []
            if isinstance(b, dict) and isinstance(b.get("toolUse"), dict)
        }
        results = [b["toolResult"] for b in blocks if isinstance(b.get("toolResult"), dict)]
        if results and {str(r.get("toolUseId")) for r in results} != uses:
            problems.append(
                f"The toolResult blocks at messages.{i}.content do not match the toolUse "
                "blocks of the previous turn."
            )
        previous = msg
    return problems
