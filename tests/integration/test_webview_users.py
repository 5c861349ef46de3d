"""The per-user web view in Chromium, as two people of two teams (issue 41 item 3).

The operator runs with ``--web-view`` on loopback and no ``--web-view-single-user``: each
request is filtered by SubjectAccessReviews the real apiserver answers from real
RoleBindings. Alice (bound by user name) reads team A, Bob (bound through his group) team B;
Carol may list team A's mailbox items but not get them; a request naming no one gets 401 and
no object at all.

Two ways in. The ``test_signed_in_*`` tests put the real oauth2-proxy (built by
``make web-auth``, started with the flags the chart's ``web-proxy`` container renders) in
front of the view, signing people in with a real OIDC provider (mockoidc's server): Chromium
follows the login redirects, the proxy names the person, a forged identity header is
replaced. The others send the headers the proxy would straight to the loopback view, which
is what the view trusts.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from swarmkit_devcluster.build import version_output
from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.paths import WEB_AUTH_BINARIES
from swarmkit_devcluster.testing import Kube, temp_namespace, wait_for
from tests.support.served import free_port
from tests.unit.test_chart_render import one, render

from .runs_support import OperatorProcess, apply_examples, create, run_manifest
from .test_webview_browser import SCREENSHOTS

pytest.importorskip("playwright.sync_api")  # what the browser fixture (conftest) drives

READ = ["get", "list", "watch"]
KINDS = ["skills", "agents", "runs", "mailboxmessages"]


@pytest.fixture(scope="module")
def user_view(cluster: LocalCluster, crds: Any) -> Iterator[tuple[OperatorProcess, str]]:
    port = free_port()
    op = OperatorProcess(
        cluster.kubeconfig,
        env={"SWARMKIT_WEB_VIEW": f"127.0.0.1:{port}", "SWARMKIT_METRICS_PORT": str(free_port())},
    )
    op.start()
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{url}/skills", timeout=2).status_code == 401
        except httpx.HTTPError:
            return False

    wait_for(up, 30, message=lambda: f"the web view at {url}; log:\n{op.tail()}")
    yield op, url
    op.stop()


def _role(kube: Kube, ns: str, name: str, rules: list[dict[str, Any]]) -> None:
    kube.rbac.create_namespaced_role(ns, {"metadata": {"name": name}, "rules": rules})


def _bind(kube: Kube, ns: str, role: str, kind: str, who: str) -> None:
    kube.rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": f"{role}-{who}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": who}],
        },
    )


def _message(team: str, text: str) -> dict[str, Any]:
    return {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "MailboxMessage",
        "metadata": {"name": f"note-{team}"},
        "spec": {
            "mailbox": "ops",
            "message": text,
            "sender": {"agent": "watcher", "run": f"run-{team}"},
            "workspace": "default",
        },
    }


@pytest.fixture
def two_teams(kube: Kube, namespace: str) -> Iterator[tuple[str, str]]:
    """Team A (``namespace``) and team B, each with the examples, a Run, a mailbox item and
    a reader Role: alice bound by name in A, the group team-b in B, carol allowed to list
    (not get) A's MailboxMessages."""
    with temp_namespace(kube, "team-b") as b:
        a = namespace
        for ns in (a, b):
            apply_examples(kube, ns)
            team = "a" if ns == a else "b"
            # A Run whose Agent does not exist: listed at once, no pod to run.
            create(kube, ns, run_manifest(f"run-{team}", agent="nobody", timeout=None))
            kube.custom.create_namespaced_custom_object(
                "swarmkit.dev", "v1alpha1", ns, "mailboxmessages",
                _message(team, f"secret plans of team {team}"),
            )  # fmt: skip
            _role(
                kube,
                ns,
                "reader",
                [{"apiGroups": ["swarmkit.dev"], "resources": KINDS, "verbs": READ}],
            )
        _bind(kube, a, "reader", "User", "alice")
        _bind(kube, b, "reader", "Group", "team-b")
        _role(
            kube,
            a,
            "item-lister",
            [{"apiGroups": ["swarmkit.dev"], "resources": ["mailboxmessages"], "verbs": ["list"]}],
        )
        _bind(kube, a, "item-lister", "User", "carol")
        yield a, b


def _as(browser: Any, user: str | None, groups: str = "") -> Any:
    """A browser context whose requests carry what the proxy sends for ``user``."""
    headers = {"X-Forwarded-User": user} if user else {}
    if groups:
        headers["X-Forwarded-Groups"] = groups
    return browser.new_context(extra_http_headers=headers, viewport={"width": 1280, "height": 900})


def _open(ctx: Any, url: str, shot: str, status: int = 200) -> Any:
    page = ctx.new_page()
    response = page.goto(url)
    assert response is not None and response.status == status, (url, response and response.status)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"users-{shot}.png"), full_page=True)
    return page


def _skill_rows(page: Any) -> set[str]:
    return {str(r.get_attribute("data-skill")) for r in page.locator("tr.skill").all()}


def _shows_only(page: Any, mine: str, theirs: str) -> None:
    text = page.content()
    assert mine in text and theirs not in text


def _eventually(ctx: Any, url: str, shot: str, wanted: str) -> Any:
    """The page at ``url`` once it shows ``wanted`` (the indexes fill by watch)."""

    def loaded() -> Any:
        page = _open(ctx, url, shot)
        if wanted in page.content():
            return page
        page.close()
        return None

    return wait_for(loaded, 30, message=lambda: f"{wanted!r} on {url}")


def test_each_person_sees_only_what_kubernetes_lets_them(
    two_teams: tuple[str, str], user_view: tuple[OperatorProcess, str], browser: Any
) -> None:
    a, b = two_teams
    _, url = user_view
    alice, bob = _as(browser, "alice", "system:authenticated"), _as(browser, "bob", "team-b,dev")
    try:
        # Skills: each their own team's, none of the other's.
        page = _eventually(alice, f"{url}/skills", "alice-skills", f"{a}/incident-triage")
        assert {row.split("/")[0] for row in _skill_rows(page)} == {a}
        assert page.locator("#viewer").inner_text() == "alice"
        page = _eventually(bob, f"{url}/skills", "bob-skills", f"{b}/incident-triage")
        assert {row.split("/")[0] for row in _skill_rows(page)} == {b}

        # Runs: the list, and the other team's objects read as absent.
        _shows_only(_eventually(alice, f"{url}/runs", "alice-runs", "run-a"), "run-a", "run-b")
        _shows_only(_eventually(bob, f"{url}/runs", "bob-runs", "run-b"), "run-b", "run-a")
        _open(alice, f"{url}/runs/{b}/run-b", "alice-their-run", status=404)
        _open(alice, f"{url}/runs/{a}/run-a", "alice-her-run")
        _open(bob, f"{url}/skills/{a}/incident-triage", "bob-their-skill", status=404)
        _open(bob, f"{url}/agents/{a}/coordinator", "bob-their-agent", status=404)
        _open(alice, f"{url}/agents/{a}/coordinator", "alice-her-agent")

        # Mailboxes: the item and its text in one's own team only.
        page = _eventually(alice, f"{url}/mailboxes", "alice-mailboxes", "secret plans of team a")
        assert f'data-namespace="{b}"' not in page.content()
        _shows_only(page, "secret plans of team a", "secret plans of team b")
        page = _eventually(bob, f"{url}/mailboxes", "bob-mailboxes", "secret plans of team b")
        assert f'data-namespace="{a}"' not in page.content()
        _shows_only(page, "secret plans of team b", "secret plans of team a")
        page = _open(alice, f"{url}/mailboxes/{b}", "alice-their-mailboxes")
        assert "secret plans" not in page.content() and page.locator("#no-mailboxes").count()
    finally:
        alice.close()
        bob.close()


def test_listing_without_get_shows_the_item_not_its_text(
    two_teams: tuple[str, str], user_view: tuple[OperatorProcess, str], browser: Any
) -> None:
    a, _ = two_teams
    _, url = user_view
    carol = _as(browser, "carol")
    try:
        page = _eventually(carol, f"{url}/mailboxes/{a}", "carol-mailboxes", 'id="item-note-a"')
        row = page.locator("#item-note-a")
        assert "message hidden: reading it needs get on MailboxMessages" in row.inner_text()
        assert "secret plans" not in page.content()
        # no list on Skills or Runs anywhere: empty pages, not errors
        assert not _skill_rows(_open(carol, f"{url}/skills", "carol-skills"))
        assert "run-a" not in _open(carol, f"{url}/runs", "carol-runs").content()
    finally:
        carol.close()


def test_a_request_naming_no_one_gets_401_and_nothing_else(
    two_teams: tuple[str, str], user_view: tuple[OperatorProcess, str], browser: Any
) -> None:
    a, b = two_teams
    _, url = user_view
    alice = {"X-Forwarded-User": "alice"}
    wait_for(lambda: "run-a" in httpx.get(f"{url}/runs", headers=alice, timeout=5).text, 30)
    anonymous = _as(browser, None)
    try:
        for path in ("/skills", "/runs", "/mailboxes", f"/skills/{a}/incident-triage"):
            page = _open(anonymous, f"{url}{path}", "anonymous", status=401)
            text = page.content()
            assert page.locator("#no-identity").count() == 1
            assert a not in text and b not in text and "incident-triage" not in text
        # an empty user header is no identity either; a group alone names no one
        empty = httpx.get(f"{url}/runs", headers={"X-Forwarded-User": ""}, timeout=5)
        assert empty.status_code == 401
        groups = httpx.get(f"{url}/runs", headers={"X-Forwarded-Groups": "team-b"}, timeout=5)
        assert groups.status_code == 401 and "run-b" not in groups.text
    finally:
        anonymous.close()


def test_a_removed_binding_hides_the_team_within_the_cache_time(
    kube: Kube, two_teams: tuple[str, str], user_view: tuple[OperatorProcess, str]
) -> None:
    a, _ = two_teams
    _, url = user_view
    alice = {"X-Forwarded-User": "alice"}

    def runs() -> str:
        return httpx.get(f"{url}/runs", headers=alice, timeout=5).text

    wait_for(lambda: "run-a" in runs(), 30)
    kube.rbac.delete_namespaced_role_binding("reader-alice", a)
    # an answer is cached 10 s: within 30 s the page must stop showing the Run
    wait_for(lambda: "run-a" not in runs(), 30, message=lambda: runs())


# --- signed in through the real oauth2-proxy ------------------------------------------------


def _web_auth_binary(name: str) -> Path:
    b = WEB_AUTH_BINARIES[name]
    if version_output(b) is None:
        pytest.fail(f"{name} is not built ({b.path}); run `make web-auth`", pytrace=False)
    return b.path


def _stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)


@dataclass(frozen=True)
class SignIn:
    """The real oauth2-proxy at ``url`` in front of the view, signing people in with the
    OIDC provider at ``issuer``; ``control`` queues who signs in next."""

    url: str
    issuer: str
    control: str
    log: Path

    def next_person(self, user: str, groups: list[str]) -> None:
        person = {"sub": user, "email": f"{user}@example.com", "groups": groups}
        httpx.post(f"{self.control}/queue", json=person, timeout=5).raise_for_status()


def chart_proxy_args(port: int, view_port: int, provider_args: list[str]) -> list[str]:
    """The ``web-proxy`` container's arguments as the chart renders them (per-user view on
    ``view_port``, the proxy on ``port``), listening on loopback rather than every address."""
    values = {
        "webView": {
            "enabled": True,
            "port": port,
            "localPort": view_port,
            "proxy": {"args": provider_args, "envFromSecret": "web-oidc"},
        }
    }
    pod = one(render(values), "Deployment")["spec"]["template"]["spec"]
    (proxy,) = [c for c in pod["containers"] if c["name"] == "web-proxy"]
    assert proxy["envFrom"] == [{"secretRef": {"name": "web-oidc"}}]
    return [a.replace("=0.0.0.0:", "=127.0.0.1:") for a in proxy["args"]]


@pytest.fixture(scope="module")
def sign_in(user_view: tuple[OperatorProcess, str], tmp_path_factory: Any) -> Iterator[SignIn]:
    _, view = user_view
    workdir = tmp_path_factory.mktemp("web-auth")
    client_secret = secrets.token_urlsafe(24)
    oidc = subprocess.Popen(
        [str(_web_auth_binary("mockoidc")), f"--client-secret={client_secret}"],
        stdout=subprocess.PIPE,
        stderr=(workdir / "mockoidc.log").open("wb"),
        text=True,
        start_new_session=True,
    )
    proxy: subprocess.Popen[Any] | None = None
    try:
        assert oidc.stdout is not None
        started = json.loads(oidc.stdout.readline() or "{}")
        assert started.get("issuer"), (workdir / "mockoidc.log").read_text()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        # What a team puts in webView.proxy.args for an OIDC provider (cookies over plain
        # http here: loopback only); client id and secrets come from the chart's Secret.
        provider = [
            "--provider=oidc",
            f"--oidc-issuer-url={started['issuer']}",
            f"--redirect-url={url}/oauth2/callback",
            "--scope=openid email profile groups",
            "--email-domain=*",
            "--cookie-secure=false",
        ]
        env = {
            **os.environ,
            "OAUTH2_PROXY_CLIENT_ID": started["client_id"],
            "OAUTH2_PROXY_CLIENT_SECRET": client_secret,
            "OAUTH2_PROXY_COOKIE_SECRET": secrets.token_hex(16),
        }
        log = workdir / "oauth2-proxy.log"
        proxy = subprocess.Popen(
            [str(_web_auth_binary("oauth2-proxy")), *chart_proxy_args(port, _port(view), provider)],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

        def up() -> bool:
            assert proxy is not None and proxy.poll() is None, log.read_text()
            try:
                return httpx.get(f"{url}/ping", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 30, message=lambda: log.read_text()[-3000:])
        yield SignIn(url, started["issuer"], started["control"], log)
    finally:
        if proxy is not None:
            _stop(proxy)
        _stop(oidc)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _signed_in(browser: Any, sign_in: SignIn, user: str, groups: list[str], path: str) -> Any:
    """A browser context of ``user`` signed in through the proxy's login flow: the proxy's
    sign-in page, its provider button, the provider's authorization redirect, the proxy's
    callback, back on ``path``. Returns (context, page at ``path``)."""
    sign_in.next_person(user, groups)
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    first = page.goto(f"{sign_in.url}{path}")
    assert first is not None and first.status == 403, "the proxy's sign-in page, not the view"
    assert "#viewer" not in page.content() and "incident-triage" not in page.content()
    page.get_by_role("button", name="Sign in with OpenID Connect").click()
    page.wait_for_url(f"{sign_in.url}{path}")
    assert any(u.startswith(f"{sign_in.issuer}/authorize?") for u in seen), seen
    assert any(u.startswith(f"{sign_in.url}/oauth2/callback?code=") for u in seen), seen
    return ctx, page


def test_signed_in_through_the_real_proxy_each_person_sees_only_their_team(
    two_teams: tuple[str, str], sign_in: SignIn, browser: Any
) -> None:
    a, b = two_teams
    alice, _ = _signed_in(browser, sign_in, "alice", ["team-a"], "/skills")
    bob, _ = _signed_in(browser, sign_in, "bob", ["team-b", "dev"], "/skills")
    try:
        # (an earlier test's team namespaces may still be terminating, with the same
        # bindings: the assertion is about this test's two teams)
        page = _eventually(alice, f"{sign_in.url}/skills", "proxy-alice-skills", f"{a}/")
        assert page.locator("#viewer").inner_text() == "alice"
        shown = {row.split("/")[0] for row in _skill_rows(page)}
        assert a in shown and b not in shown, shown
        page = _eventually(bob, f"{sign_in.url}/skills", "proxy-bob-skills", f"{b}/")
        assert page.locator("#viewer").inner_text() == "bob"
        shown = {row.split("/")[0] for row in _skill_rows(page)}
        assert b in shown and a not in shown, shown
        runs = f"{sign_in.url}/runs"
        _shows_only(_eventually(alice, runs, "proxy-alice-runs", "run-a"), "run-a", "run-b")
        _shows_only(_eventually(bob, runs, "proxy-bob-runs", "run-b"), "run-b", "run-a")
        _open(alice, f"{sign_in.url}/runs/{b}/run-b", "proxy-alice-their-run", status=404)
        page = _eventually(bob, f"{sign_in.url}/mailboxes", "proxy-bob-mail", "plans of team b")
        _shows_only(page, "secret plans of team b", "secret plans of team a")
    finally:
        alice.close()
        bob.close()


def test_signed_in_forged_identity_headers_are_replaced_or_refused(
    two_teams: tuple[str, str], sign_in: SignIn, browser: Any
) -> None:
    a, _ = two_teams
    forged = {"X-Forwarded-User": "alice", "X-Forwarded-Groups": "system:masters"}
    # No session: the proxy answers with its sign-in page (which echoes the path it was
    # asked for), whatever the headers say; the view is never reached.
    for path in ("/runs", f"/runs/{a}/run-a", "/mailboxes"):
        r = httpx.get(f"{sign_in.url}{path}", headers=forged, timeout=5)
        assert r.status_code in (401, 403), (path, r.status_code)
        assert "Sign in with OpenID Connect" in r.text and 'id="viewer"' not in r.text, path
        assert "secret plans" not in r.text
        if path == "/runs":
            assert "run-a" not in r.text
    # Bob signed in, claiming to be alice in system:masters: the proxy replaces both headers.
    bob, _ = _signed_in(browser, sign_in, "bob", ["team-b"], "/runs")
    try:
        bob.set_extra_http_headers(forged)
        page = _eventually(bob, f"{sign_in.url}/runs", "proxy-bob-forged", "run-b")
        assert page.locator("#viewer").inner_text() == "bob"
        _shows_only(page, "run-b", "run-a")
        _open(bob, f"{sign_in.url}/runs/{a}/run-a", "proxy-bob-forged-their-run", status=404)
    finally:
        bob.close()


def _non_loopback_address() -> str:
    """This machine's address on its default route (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("10.255.255.255", 9))
        address = str(s.getsockname()[0])
    assert not address.startswith("127."), f"no non-loopback address to try ({address})"
    return address


def test_the_per_user_view_is_not_reachable_except_on_loopback(
    user_view: tuple[OperatorProcess, str],
) -> None:
    _, url = user_view
    assert httpx.get(f"{url}/runs", timeout=5).status_code == 401  # serving, on loopback
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((_non_loopback_address(), _port(url)), timeout=5).close()
