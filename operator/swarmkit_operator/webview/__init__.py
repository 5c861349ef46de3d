"""A read-only web view of the skill library, agents and runs, served by the operator.

* :mod:`.pages` — what each page shows, from the in-memory indexes and the skill library;
* :mod:`.access` — who the authenticating proxy says is asking, and what Kubernetes lets
  them see (cached SubjectAccessReviews);
* :mod:`.render` — Jinja2 templates (autoescape) and Markdown without raw HTML;
* :mod:`.server` — :class:`WebView`, an aiohttp server in the operator's event loop
  answering GET and HEAD only.

Kopf-free (import-linter contract ``kopf-allow-list``); ``handlers.library`` starts it when
the operator runs with ``--web-view HOST:PORT`` (per-user unless ``--web-view-single-user``).
"""

from .access import Access
from .pages import Sources
from .server import WebView, is_loopback, parse_address

__all__ = ["Access", "Sources", "WebView", "is_loopback", "parse_address"]
