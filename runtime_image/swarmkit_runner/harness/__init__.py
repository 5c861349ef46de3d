"""Harness nodes: coding harness CLIs run as Topology nodes (see :mod:`.base`).

:func:`harness_for` gives the :class:`.base.Harness` of a kind; each kind's module is
imported only when a node of that kind runs (a Run without one never loads them).
"""

from __future__ import annotations

import importlib
from typing import Final

from .base import Harness

#: Harness kind → ``module:class`` (relative to this package).
HARNESS_MODULES: Final[dict[str, str]] = {
    "claude-code": "claude_code:ClaudeCode",
    "codex": "codex:Codex",
    "gemini-cli": "gemini_cli:GeminiCli",
}


def harness_for(kind: str) -> Harness:
    """The harness of ``kind`` (KeyError when no module implements it)."""
    module_name, _, class_name = HARNESS_MODULES[kind].partition(":")
    module = importlib.import_module(f"{__name__}.{module_name}")
    harness: Harness = getattr(module, class_name)()
    return harness


__all__ = ["HARNESS_MODULES", "harness_for"]
