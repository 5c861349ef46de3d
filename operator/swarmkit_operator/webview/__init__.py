"""A read-only web view of the skill library, agents and runs, served by the operator.

* :mod:`.pages` — what each page shows, from the in-memory indexes and the skill library;
* :mod:`.render` — Jinja2 templates (autoescape) and Markdown without raw HTML;
* :mod:`.server` — :class:`WebView`, an aiohttp server in the operator's event loop
  answering GET and HEAD only.

Kopf-free (import-linter contract ``kopf-allow-list``); ``handlers.library`` starts it when
the operator runs with ``--web-view HOST:PORT``.
"""

from .pages import Sources
from .server import WebView, parse_address

__all__ = ["Sources", "WebView", "parse_address"]
