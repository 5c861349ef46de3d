"""The web view's HTTP server: GET and HEAD only, HTML rendered from memory.

:class:`WebView` runs an aiohttp server inside the operator's event loop, so a page reads
the same in-memory indexes and skill library the reconcilers use (:mod:`.pages`) and never
calls the Kubernetes API. Every other method gets ``405 Method Not Allowed`` before any
routing: there are no write endpoints. Responses carry a Content-Security-Policy that allows
no script at all (defence in depth: the templates escape user text anyway).

There is no login of its own: whoever reaches the address sees what the operator sees. It
listens where ``--web-view`` says (the chart: ``0.0.0.0:8082`` in the pod, behind a
ClusterIP Service, for ``kubectl port-forward`` or an authenticating proxy).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from aiohttp import web

from . import mailboxes, pages, verdicts
from .render import render

log = logging.getLogger("swarmkit_operator.webview")

READ_METHODS = frozenset({"GET", "HEAD"})
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def parse_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``:PORT``, host 127.0.0.1) → (host, port); ValueError names why."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    return (host.strip("[]") or "127.0.0.1"), int(port)


@web.middleware
async def _read_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method not in READ_METHODS:
        response: web.StreamResponse = web.Response(
            status=405,
            text="405: this view is read-only (GET and HEAD only)\n",
            headers={"Allow": "GET, HEAD"},
        )
    else:
        started = time.perf_counter()
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            response = web.Response(status=exc.status, text=f"{exc.status}: {exc.reason}\n")
        response.headers["Server-Timing"] = (
            f"render;dur={(time.perf_counter() - started) * 1000:.1f}"
        )
    response.headers.update(HEADERS)
    return response


class WebView:
    """The read-only web view (see the module docstring)."""

    def __init__(self, sources: pages.Sources) -> None:
        self.sources = sources
        self.app = web.Application(middlewares=[_read_only])
        self.css = resources.files(__package__).joinpath("static/style.css").read_bytes()
        routes = self.app.router
        routes.add_get("/", self.index)
        routes.add_get("/skills", self.skills)
        routes.add_get("/skills/{namespace}/{name}", self.skill)
        routes.add_get("/agents/{namespace}/{name}", self.agent)
        routes.add_get("/runs", self.runs)
        routes.add_get("/runs/{namespace}/{name}", self.run)
        routes.add_get("/mailboxes", self.mailboxes)
        routes.add_get("/mailboxes/{namespace}", self.mailboxes)
        routes.add_get("/static/style.css", self.style)
        routes.add_get("/verdicts/{namespace}/{plural}/{name}", self.verdict)
        self._runner: web.AppRunner | None = None
        self.address = ""

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self.address = f"http://{host}:{port}"
        log.info("web view listening on %s (read-only)", self.address)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- pages -------------------------------------------------------------------------------
    @staticmethod
    def _html(template: str, status: int = 200, **context: Any) -> web.Response:
        return web.Response(
            text=render(template, **context), status=status, content_type="text/html"
        )

    def _not_found(self, what: str) -> web.Response:
        return self._html("not_found.html", status=404, what=what)

    async def index(self, _request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "/skills"})

    async def skills(self, _request: web.Request) -> web.Response:
        return self._html("skills.html", **pages.skills_list(self.sources))

    async def skill(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        data = pages.skill_detail(self.sources, ns, name)
        if data is None:
            return self._not_found(f"no skill {ns}/{name}")
        return self._html("skill.html", **data)

    async def agent(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        data = pages.agent_detail(self.sources, ns, name)
        if data is None:
            return self._not_found(f"no agent {ns}/{name}")
        return self._html("agent.html", **data)

    async def verdict(self, request: web.Request) -> web.Response:
        """A Topology's or Agent's promotion verdict, as JSON (:mod:`.verdicts`)."""
        ns, plural, name = (request.match_info[k] for k in ("namespace", "plural", "name"))
        found = verdicts.verdict(self.sources, ns, plural, name)
        if found is None:
            return web.json_response({"error": f"no {plural} {ns}/{name}"}, status=404)
        return web.json_response(found)

    async def runs(self, _request: web.Request) -> web.Response:
        return self._html("runs.html", **pages.runs_list(self.sources))

    async def run(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        data = pages.run_detail(self.sources, ns, name)
        if data is None:
            return self._not_found(f"no run {ns}/{name}")
        return self._html("run.html", **data)

    async def mailboxes(self, request: web.Request) -> web.Response:
        namespace = request.match_info.get("namespace")
        return self._html("mailboxes.html", **mailboxes.mailboxes_list(self.sources, namespace))

    async def style(self, _request: web.Request) -> web.Response:
        return web.Response(body=self.css, content_type="text/css")
