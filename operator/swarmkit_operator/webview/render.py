"""HTML rendering: Jinja2 templates with autoescape on, and Markdown without raw HTML.

Every value a template prints is escaped (``autoescape=True``), so a skill description or
a run output holding ``<script>`` is shown as text. A skill's instructions are Markdown:
markdown-it renders them with raw HTML disabled (an ``<img onerror=...>`` in them comes out
escaped, as text) and refuses ``javascript:`` links; only that rendered HTML is marked safe.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

if TYPE_CHECKING:
    from jinja2 import Environment
    from markdown_it import MarkdownIt

# Jinja2 and markdown-it are imported when a web view starts (:func:`prepare`), not with
# the operator: ~45 ms of CPU at every start, most of them without one (no --web-view).


@functools.cache
def _markdown_it() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def markdown(text: str) -> Markup:
    """``text`` (Markdown) as HTML; raw HTML in it is escaped, never passed through."""
    return Markup(_markdown_it().render(text or ""))


def short(value: Any, length: int = 12) -> str:
    return str(value or "")[:length]


@functools.cache
def _environment() -> Environment:
    from jinja2 import Environment, PackageLoader

    env = Environment(
        loader=PackageLoader("swarmkit_operator.webview", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["markdown"] = markdown
    env.filters["short"] = short
    return env


def prepare() -> None:
    """Import and build the template environment and the Markdown renderer now (when the
    web view starts), not on its first request."""
    _environment()
    _markdown_it()


def render(template: str, **context: Any) -> str:
    return _environment().get_template(template).render(**context)
