"""Fixtures of the harness tests."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from tests.support.mcp_servers import HttpMcpServer


@pytest.fixture(scope="module")
def conformance_mcp() -> Iterator[HttpMcpServer]:
    """The gateway stand-in of a conformance module: an MCP server over streamable HTTP
    (its ``echo`` tool) behind a bearer token."""
    with HttpMcpServer("conformance", token=secrets.token_urlsafe(24)) as server:
        yield server
