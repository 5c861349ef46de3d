"""The web view's HTTP server: GET and HEAD only, HTML rendered from memory.

:class:`WebView` runs an aiohttp server inside the operator's event loop, so a page reads
the same in-memory indexes and skill library the reconcilers use (:mod:`.pages`) and never
calls the Kubernetes API. Every other method gets ``405 Method Not Allowed`` before any
routing: there are no write endpoints. Responses carry a Content-Security-Policy that allows
no script at all (defence in depth: the templates escape user text anyway).

It has no login of its own. Per-user (the default), it serves a person only what Kubernetes
lets them see: the authenticating proxy in front names them (:mod:`.access`), each list page
keeps the namespaces where they may ``list`` that kind, a detail page needs ``get`` (else
it is "not found", like an object that does not exist), mailbox message text needs ``get``
on MailboxMessages; a request without an identity gets ``401`` and nothing else. It then
listens on loopback only, behind the proxy in the same pod. Single-user (``--web-view-single-user``,
the demo): whoever reaches the address sees what the operator sees.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from aiohttp import web

from . import evaluation, mailboxes, pages, verdicts
from .access import (
    AGENTS,
    GROUPS_HEADER,
    MAILBOX_MESSAGES,
    RUNS,
    SKILLS,
    USER_HEADER,
    Access,
    Identity,
    identity_of,
)
from .render import prepare, render

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
#: Served without an identity: the stylesheet of the 401 page.
PUBLIC_PATHS = frozenset({"/static/style.css"})
#: Where the middleware leaves the request's :class:`Identity`.
IDENTITY = web.RequestKey("identity", Identity)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (only the pod itself can reach it)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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


def _who(access: Access | None) -> Any:
    """The middleware that names the person (per-user), or lets everyone in (single-user)."""

    @web.middleware
    async def who(request: web.Request, handler: Handler) -> web.StreamResponse:
        if access is None or request.path in PUBLIC_PATHS:
            return await handler(request)
        identity = identity_of(
            request.headers.get(USER_HEADER), request.headers.getall(GROUPS_HEADER, [])
        )
        if identity is None:
            return web.Response(
                status=401,
                text=render("no_identity.html", viewer=None, header=USER_HEADER),
                content_type="text/html",
            )
        request[IDENTITY] = identity
        return await handler(request)

    return who


class WebView:
    """The read-only web view (see the module docstring); ``access`` None: single-user."""

    def __init__(self, sources: pages.Sources, access: Access | None = None) -> None:
        self.sources = sources
        self.access = access
        self.app = web.Application(middlewares=[_read_only, _who(access)])
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
        routes.add_get("/evalruns", self.evalruns)
        routes.add_get("/evalruns/{namespace}/{name}", self.evalrun)
        routes.add_get("/promotion/{namespace}/{plural}/{name}", self.promotion)
        self._runner: web.AppRunner | None = None
        self.address = ""

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        prepare()
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

    # -- who may see what --------------------------------------------------------------------
    @staticmethod
    def _viewer(request: web.Request) -> Identity | None:
        return request.get(IDENTITY)

    async def _shown(
        self, request: web.Request, namespaces: set[str], resource: str, verb: str = "list"
    ) -> pages.Shown:
        """The namespaces whose ``resource`` the viewer may ``verb`` (None: single-user)."""
        who = self._viewer(request)
        if self.access is None or who is None:
            return None
        return await self.access.namespaces(who, namespaces, verb, resource)

    async def _may_get(self, request: web.Request, namespace: str, resource: str) -> bool:
        who = self._viewer(request)
        if self.access is None or who is None:
            return True
        return await self.access.allowed(who, namespace, "get", resource)

    # -- pages -------------------------------------------------------------------------------
    def _html(
        self, request: web.Request, template: str, status: int = 200, **context: Any
    ) -> web.Response:
        who = self._viewer(request)
        return web.Response(
            text=render(template, viewer=who.user if who else None, **context),
            status=status,
            content_type="text/html",
        )

    def _not_found(self, request: web.Request, what: str) -> web.Response:
        return self._html(request, "not_found.html", status=404, what=what)

    async def index(self, _request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "/skills"})

    async def skills(self, request: web.Request) -> web.Response:
        shown = await self._shown(request, pages.skill_namespaces(self.sources), SKILLS)
        return self._html(request, "skills.html", **pages.skills_list(self.sources, shown))

    async def skill(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        data = None
        if await self._may_get(request, ns, SKILLS):
            data = pages.skill_detail(self.sources, ns, name)
        if data is None:  # not allowed reads as absent: no probing for names
            return self._not_found(request, f"no skill {ns}/{name}")
        agents = await self._shown(request, {ns}, AGENTS)
        if agents is not None and ns not in agents:
            data["granted_by"] = []  # the granting Agents' names need list on Agents
        return self._html(request, "skill.html", **data)

    async def agent(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        data = None
        if await self._may_get(request, ns, AGENTS):
            data = pages.agent_detail(self.sources, ns, name)
        if data is None:
            return self._not_found(request, f"no agent {ns}/{name}")
        return self._html(request, "agent.html", **data)

    async def verdict(self, request: web.Request) -> web.Response:
        """A Topology's or Agent's promotion verdict, as JSON (:mod:`.verdicts`); per-user,
        only for a caller who may ``get`` that kind in its namespace (a 404 otherwise, as for
        the pages)."""
        ns, plural, name = (request.match_info[k] for k in ("namespace", "plural", "name"))
        found = None
        if plural in verdicts.VIEWS and await self._may_get(request, ns, plural):
            found = verdicts.verdict(self.sources, ns, plural, name)
        if found is None:
            return web.json_response({"error": f"no {plural} {ns}/{name}"}, status=404)
        return web.json_response(found)

    async def runs(self, request: web.Request) -> web.Response:
        shown = await self._shown(request, pages.run_namespaces(self.sources), RUNS)
        return self._html(request, "runs.html", **pages.runs_list(self.sources, shown))

    async def run(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        data = None
        if await self._may_get(request, ns, RUNS):
            data = pages.run_detail(self.sources, ns, name)
        if data is None:
            return self._not_found(request, f"no run {ns}/{name}")
        return self._html(request, "run.html", **data)

    async def evalruns(self, request: web.Request) -> web.Response:
        present = evaluation.evalrun_namespaces(self.sources)
        shown = await self._shown(request, present, evaluation.EVAL_RUNS)
        data = evaluation.evalruns_list(self.sources, shown)
        return self._html(request, "evalruns.html", **data)

    async def evalrun(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        data = None
        if await self._may_get(request, ns, evaluation.EVAL_RUNS):
            data = evaluation.evalrun_detail(self.sources, ns, name)
        if data is None:
            return self._not_found(request, f"no EvalRun {ns}/{name}")
        return self._html(request, "evalrun.html", **data)

    async def promotion(self, request: web.Request) -> web.Response:
        """A Topology's or Agent's promotion history: needs ``get`` on that kind."""
        ns, plural, name = (request.match_info[k] for k in ("namespace", "plural", "name"))
        data = None
        if plural in evaluation.PROMOTABLE and await self._may_get(request, ns, plural):
            data = evaluation.promotion_detail(self.sources, ns, plural, name)
        if data is None:
            return self._not_found(request, f"no {plural} {ns}/{name}")
        return self._html(request, "promotion.html", **data)

    async def mailboxes(self, request: web.Request) -> web.Response:
        namespace = request.match_info.get("namespace")
        present = mailboxes.mailbox_namespaces(self.sources)
        if namespace is not None:
            present &= {namespace}
        shown = await self._shown(request, present, MAILBOX_MESSAGES)
        readable = await self._shown(request, set(shown or ()), MAILBOX_MESSAGES, "get")
        data = mailboxes.mailboxes_list(self.sources, namespace, shown, readable)
        return self._html(request, "mailboxes.html", **data)

    async def style(self, _request: web.Request) -> web.Response:
        return web.Response(body=self.css, content_type="text/css")
