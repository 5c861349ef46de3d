"""What the scripted model server received: :class:`RecordedRequest`, with accessors that
read the same facts (tools offered, system prompt, messages, tool results) from every wire
format (Anthropic, OpenAI Chat Completions and Responses, Gemini, Bedrock)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .model_contract import Wire

_INVALID = re.compile(r"[^A-Za-z0-9_-]")


@dataclass
class RecordedRequest:
    """A request the server received."""

    wire: Wire
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float
    #: Why the real API would refuse the body (empty: accepted and answered).
    problems: list[str] = field(default_factory=list)
    #: The URL's query parameters (Azure's ``api-version``).
    query: dict[str, str] = field(default_factory=dict)

    @property
    def tools(self) -> dict[str, dict[str, Any]]:
        """Offered tool name → input schema."""
        out: dict[str, dict[str, Any]] = {}
        if self.wire == "bedrock":
            for tool in (self.body.get("toolConfig") or {}).get("tools") or []:
                spec = tool.get("toolSpec") or {}
                out[spec["name"]] = (spec.get("inputSchema") or {}).get("json", {})
            return out
        if self.wire == "gemini":
            for tool in self.body.get("tools") or []:
                for fn in tool.get("functionDeclarations") or []:
                    out[fn["name"]] = fn.get("parametersJsonSchema", {})
            return out
        if self.wire == "responses":
            return {name: tool.get("parameters") or {} for name, tool in self._responses_tools()}
        for tool in self.body.get("tools") or []:
            if self.wire == "anthropic":
                out[tool["name"]] = tool.get("input_schema", {})
            else:
                fn = tool.get("function", {})
                out[fn["name"]] = fn.get("parameters", {})
        return out

    @property
    def tool_names(self) -> list[str]:
        return list(self.tools)

    def _responses_tools(self) -> list[tuple[str, dict[str, Any]]]:
        """The offered tools and those a client-run tool search loaded into the input."""
        tools = list(self.body.get("tools") or [])
        items = self.body.get("input")
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("type") == "tool_search_output":
                tools += item.get("tools") or []
        return _responses_tools(tools)

    def tool_description(self, name: str) -> str:
        if self.wire == "responses":
            for qualified, tool in self._responses_tools():
                if qualified == name:
                    return str(tool.get("description", ""))
        for tool in self.body.get("tools") or []:
            fn = tool if self.wire in ("anthropic", "responses") else tool.get("function", {})
            if fn.get("name") == name:
                return str(fn.get("description", ""))
        raise KeyError(name)

    @property
    def system(self) -> str:
        if self.wire == "bedrock":
            return "".join(str(b.get("text", "")) for b in self.body.get("system") or [])
        if self.wire == "gemini":
            parts = (self.body.get("systemInstruction") or {}).get("parts") or []
            return "".join(str(p.get("text", "")) for p in parts)
        if self.wire == "responses":
            said = [str(self.body.get("instructions") or "")]
            said += [m["content"] for m in self.messages if m["role"] in ("system", "developer")]
            return "\n".join(s for s in said if s)
        if self.wire == "anthropic":
            system = self.body.get("system", "")
            if isinstance(system, list):
                return "".join(b.get("text", "") for b in system)
            return str(system)
        for msg in self.body.get("messages", []):
            if msg.get("role") == "system":
                return str(msg.get("content", ""))
        return ""

    @property
    def messages(self) -> list[dict[str, Any]]:
        if self.wire == "bedrock":  # as role/content, the text blocks joined
            return [
                {
                    "role": m.get("role"),
                    "content": "".join(str(b.get("text", "")) for b in m.get("content") or []),
                    "blocks": m.get("content") or [],
                }
                for m in self.body.get("messages") or []
            ]
        if self.wire == "gemini":  # as role/content, the parts' text joined
            return [
                {
                    "role": c.get("role"),
                    "content": "".join(str(p.get("text", "")) for p in c.get("parts") or []),
                    "parts": c.get("parts") or [],
                }
                for c in self.body.get("contents") or []
            ]
        if self.wire == "responses":  # message items as role/content, the text parts joined
            items = self.body.get("input")
            if isinstance(items, str):
                return [{"role": "user", "content": items, "item": {}}]
            return [
                {"role": i.get("role"), "content": _responses_text(i.get("content")), "item": i}
                for i in items or []
                if isinstance(i, dict) and i.get("type", "message") == "message"
            ]
        return list(self.body.get("messages", []))

    @property
    def first_user_text(self) -> str:
        for msg in self.messages:
            if msg.get("role") == "user":
                content = msg.get("content")
                if isinstance(content, str):
                    return content
        return ""

    def tool_results(self) -> list[tuple[str, bool]]:
        """(content, is_error) of the tool results in the latest turn."""
        msgs = self.messages
        if self.wire == "bedrock":
            last = msgs[-1] if msgs else {}
            return [
                (
                    "".join(str(c.get("text", "")) for c in b["toolResult"].get("content") or []),
                    b["toolResult"].get("status") == "error",
                )
                for b in last.get("blocks") or []
                if isinstance(b.get("toolResult"), dict)
            ]
        if self.wire == "gemini":
            last = msgs[-1] if msgs else {}
            out_g = []
            for part in last.get("parts") or []:
                response = (part.get("functionResponse") or {}).get("response")
                if isinstance(response, dict):
                    is_error = "error" in response
                    out_g.append((str(response.get("error" if is_error else "output")), is_error))
            return out_g
        if self.wire == "responses":  # the calls and outputs that end the input
            items = self.body.get("input")
            tail: list[tuple[str, bool]] = []
            for item in reversed(items if isinstance(items, list) else []):
                kind = item.get("type") if isinstance(item, dict) else None
                if kind in ("function_call", "custom_tool_call"):
                    continue
                if kind not in ("function_call_output", "custom_tool_call_output"):
                    break
                content = _responses_text(item.get("output"))
                tail.append((content, content.startswith("ERROR: ")))
            return list(reversed(tail))
        if self.wire == "anthropic":
            last = msgs[-1] if msgs else {}
            content = last.get("content")
            if not isinstance(content, list):
                return []
            return [
                (str(b.get("content", "")), bool(b.get("is_error")))
                for b in content
                if b.get("type") == "tool_result"
            ]
        out: list[tuple[str, bool]] = []
        for msg in reversed(msgs):
            if msg.get("role") != "tool":
                break
            content = str(msg.get("content", ""))
            out.append((content, content.startswith("ERROR: ")))
        return list(reversed(out))


def _responses_tools(tools: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """Responses API tools by name: function and custom tools, a namespace's tools as
    ``<namespace>.<name>`` (a call names both), and ``tool_search`` (the client-run search
    that loads deferred tools, e.g. codex's MCP tools) under that name."""
    out: list[tuple[str, dict[str, Any]]] = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        kind = tool.get("type")
        if kind in ("function", "custom") and "name" in tool:
            out.append((str(tool["name"]), tool))
        elif kind == "namespace":
            inner = _responses_tools(tool.get("tools") or [])
            out += [(f"{tool.get('name')}.{name}", t) for name, t in inner]
        elif kind == "tool_search":
            out.append(("tool_search", tool))
    return out


def _responses_text(content: Any) -> str:
    """A Responses API message content or call output (a string or a list of parts) as text."""
    if isinstance(content, str):
        return content
    return "".join(
        str(p.get("text", "")) for p in content or [] if isinstance(p, dict) and "text" in p
    )


def match_tool(name: str, offered: list[str]) -> str:
    if name in offered:
        return name
    wanted = _INVALID.sub("_", name)
    for candidate in offered:
        if candidate == wanted or _INVALID.sub("_", candidate) == wanted:
            return candidate
    return name  # not offered: the runner must refuse it
