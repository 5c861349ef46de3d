"""Fixtures for the runner tests: real servers on loopback, real subprocesses."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.a2a_server import A2AServer
from tests.support.mcp_servers import HttpMcpServer
from tests.support.model_server import ScriptedModelServer

NPM_PREFIX = Path.home() / ".cache" / "swarmkit-operator" / "npm"
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem"
HTTP_MCP_TOKEN = "mcp-test-token-5f1c"
A2A_TOKEN = "a2a-test-token-93d2"


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    """A scripted model API (both wire formats); push replies with ``.push(...)``."""
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture(scope="session")
def http_mcp() -> Iterator[HttpMcpServer]:
    """The MCP test server over streamable HTTP, requiring a bearer token."""
    with HttpMcpServer(name="test-http", token=HTTP_MCP_TOKEN) as server:
        yield server


@pytest.fixture(scope="session")
def filesystem_server_bin() -> Path:
    """The public reference filesystem MCP server from the npm registry (cached)."""
    binary = NPM_PREFIX / "node_modules" / ".bin" / "mcp-server-filesystem"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: cannot fetch the public filesystem MCP server")
    NPM_PREFIX.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(NPM_PREFIX),
            "--no-audit",
            "--no-fund",
            FILESYSTEM_PACKAGE,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "npm_config_update_notifier": "false"},
    )
    if proc.returncode != 0 or not binary.exists():
        pytest.skip(f"the npm registry is unreachable ({proc.stderr.strip()[-200:]})")
    return binary


@pytest.fixture(scope="session")
def a2a_server() -> Iterator[A2AServer]:
    """The A2A test agent (a2a-sdk; A2A 1.0 and 0.3 cards), requiring a bearer token."""
    with A2AServer(token=A2A_TOKEN) as server:
        yield server
