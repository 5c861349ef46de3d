"""HTML rendering: Jinja2 templates with autoescape on, and Markdown without raw HTML.

Every value a template prints is escaped (``autoescape=True``), so a skill description or
a run output holding ``<script>`` is shown as text. A skill's instructions are Markdown:
markdown-it renders them with raw HTML disabled (an ``<img onerror=...>`` in them comes out
escaped, as text) and refuses ``javascript:`` links; only that rendered HTML is marked safe.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader
from markdown_it import MarkdownIt
from markupsafe import Markup

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def markdown(text: str) -> Markup:
    """``text`` (Markdown) as HTML; raw HTML in it is escaped, never passed through."""
    return Markup(_MARKDOWN.render(text or ""))


def short(value: Any, length: int = 12) -> str:
    return str(value or "")[:length]


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("swarmkit_operator.webview", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["markdown"] = markdown
    env.filters["short"] = short
    return env


ENV = _environment()


def render(template: str, **context: Any) -> str:
    return ENV.get_template(template).render(**context)
