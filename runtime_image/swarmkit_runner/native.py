"""Native host tools, all off by default: ``bash``, ``file_io``, ``web_search``.

``bash`` and ``file_io`` work in ``<scratch>/work``; ``file_io`` refuses any path that leaves
it (``..``, absolute paths, symlinks out). ``bash`` runs contained (see :mod:`.sandbox`) with
a minimal environment (no runner secrets). ``web_search`` needs the Workspace's
``searchProvider`` (checked when the bundle is loaded: enabling it without one is a start-up
error naming it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from swarmkit_api.bundle import BundleAgent

from .catalog import ToolEntry, as_text
from .context import RunContext
from .errors import ToolError
from .sandbox import Limits, run_contained

MAX_FILE_BYTES = 1024 * 1024
MAX_SEARCH_BYTES = 64 * 1024
BASH_DEFAULT_TIMEOUT = 60
BASH_MAX_TIMEOUT = 600

BASH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "A bash command line."},
        "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": BASH_MAX_TIMEOUT},
    },
    "required": ["command"],
    "additionalProperties": False,
}
FILE_IO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {"type": "string", "enum": ["read", "write", "list", "delete"]},
        "path": {"type": "string", "description": "Relative path in the working directory."},
        "content": {"type": "string", "description": "For write: the new content."},
    },
    "required": ["operation"],
    "additionalProperties": False,
}
WEB_SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
    "additionalProperties": False,
}


def confined(root: Path, path: str) -> Path:
    """``root/path`` unless it leaves ``root`` (absolute, ``..`` or a symlink out)."""
    if path.startswith("/") or "\x00" in path:
        raise ToolError(
            f"{path!r}: only relative paths inside the working directory", "PathNotAllowed"
        )
    real_root = root.resolve()
    real = Path(os.path.realpath(real_root / path))
    if real != real_root and not real.is_relative_to(real_root):
        raise ToolError(f"{path!r} is outside the working directory", "PathNotAllowed")
    return real


def native_tools(ctx: RunContext, agent: BundleAgent) -> list[ToolEntry]:
    native = agent.spec.native_tools
    if native is None:
        return []
    entries: list[ToolEntry] = []
    if native.bash:
        entries.append(_bash(ctx))
    if native.file_io:
        entries.append(_file_io(ctx))
    if native.web_search:
        entries.append(_web_search(ctx))
    return entries


def _bash(ctx: RunContext) -> ToolEntry:
    async def bash(args: dict[str, Any]) -> str:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command must be a non-empty string", "InvalidArguments")
        timeout = min(int(args.get("timeout_seconds") or BASH_DEFAULT_TIMEOUT), BASH_MAX_TIMEOUT)
        shell = shutil.which("bash") or "/bin/sh"
        work = ctx.work_dir
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(work),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
        }
        limits = Limits(timeout_seconds=float(timeout), cpu_seconds=timeout + 1)
        result = await run_contained([shell, "-c", command], work, env, limits)
        if result.timed_out:
            raise ToolError(f"command killed after {timeout}s", "Timeout")
        return as_text(
            {
                "exit_code": result.exit_code,
                "stdout": result.stdout,
                "stderr": result.stderr,
                "output_truncated": result.truncated,
            }
        )

    return ToolEntry(
        "bash",
        "Run a bash command in the run's scratch working directory.",
        BASH_SCHEMA,
        "native",
        bash,
    )


def _file_io(ctx: RunContext) -> ToolEntry:
    async def file_io(args: dict[str, Any]) -> str:
        op = args.get("operation")
        rel = str(args.get("path") or ".")
        root = ctx.work_dir
        target = confined(root, rel)
        if op == "read":
            if not target.is_file():
                raise ToolError(f"{rel!r} is not a file", "FileNotFound")
            if target.stat().st_size > MAX_FILE_BYTES:
                raise ToolError(f"{rel!r} is larger than 1 MiB", "FileTooLarge")
            return target.read_text(encoding="utf-8", errors="replace")
        if op == "write":
            content = args.get("content")
            if not isinstance(content, str):
                raise ToolError("write needs content (a string)", "InvalidArguments")
            if len(content.encode()) > MAX_FILE_BYTES:
                raise ToolError("content is larger than 1 MiB", "FileTooLarge")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
            return f"wrote {len(content.encode())} bytes to {rel}"
        if op == "list":
            if not target.is_dir():
                raise ToolError(f"{rel!r} is not a directory", "FileNotFound")
            names = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())
            return "\n".join(names)
        if op == "delete":
            if target == root.resolve():
                raise ToolError("refusing to delete the working directory", "PathNotAllowed")
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            else:
                raise ToolError(f"{rel!r} does not exist", "FileNotFound")
            return f"deleted {rel}"
        raise ToolError("operation must be read, write, list or delete", "InvalidArguments")

    return ToolEntry(
        "file_io",
        "Read, write, list or delete files in the run's scratch working directory.",
        FILE_IO_SCHEMA,
        "native",
        file_io,
    )


def _web_search(ctx: RunContext) -> ToolEntry:
    provider = ctx.bundle.workspace.search_provider
    assert provider is not None  # checked when the bundle was loaded

    async def web_search(args: dict[str, Any]) -> str:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("query must be a non-empty string", "InvalidArguments")
        headers = {}
        if provider.api_key is not None:
            headers["Authorization"] = f"Bearer {ctx.secrets.get(provider.api_key)}"
        import httpx  # imported by ctx.http already; a run without web_search never does

        try:
            response = await ctx.http.get(
                provider.url, params={"q": query}, headers=headers, timeout=30.0
            )
        except httpx.HTTPError as exc:
            raise ToolError(
                f"search provider unreachable: {type(exc).__name__}", "HttpError"
            ) from None
        body = response.text[:MAX_SEARCH_BYTES]
        if response.status_code >= 300:
            raise ToolError(
                f"search provider: HTTP {response.status_code}: {body[:500]}", "HttpError"
            )
        return body

    return ToolEntry("web_search", "Search the web.", WEB_SEARCH_SCHEMA, "native", web_search)
