"""The API client's requests, sent on the event loop to a real HTTP server on loopback.

What a caller of ``k8s.request`` relies on: the body and headers it sends (a merge patch
as JSON with its content type, the credentials' token, the query), the answer decoded,
transient refusals (429 with ``Retry-After``, 5xx, no connection) retried and permanent ones
returned, the leader's write gate checked before every attempt, at most ``workers``
requests in flight, and a Run's start never waiting behind them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from swarmkit_operator import k8s
from tests.support.http_server import HttpRequest, RecordingHttpServer
from tests.support.kubeconfigs import token_kubeconfig

T = TypeVar("T")
PATH = "/apis/swarmkit.dev/v1alpha1/namespaces/team-a/skills/summarize"


def _configure(path: Path, url: str, **settings: Any) -> None:
    k8s.configure(kubeconfig=token_kubeconfig(path, url), **settings)


def _run(call: Awaitable[T]) -> T:
    """Run ``call`` on a loop of its own, closing the client's connections on it after."""

    async def scenario() -> T:
        try:
            return await call
        finally:
            await k8s.close_connections()

    return asyncio.run(scenario())


def test_a_merge_patch_is_sent_as_json_with_its_type_token_and_query(kubeconfig: Path) -> None:
    with RecordingHttpServer() as server:
        _configure(kubeconfig, server.url)
        status, answer = _run(
            k8s.request(
                "PATCH",
                PATH + "/status",
                {"status": {"observedGeneration": 3}},
                content_type="application/merge-patch+json",
                query=[("fieldManager", "swarmkit-reconcile")],
            )
        )
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("PATCH", PATH + "/status")
    assert sent.body == {"status": {"observedGeneration": 3}}
    assert sent.headers["content-type"] == "application/merge-patch+json"
    assert sent.headers["authorization"] == "Bearer the-token"
    assert sent.query == {"fieldManager": ["swarmkit-reconcile"]}
    assert "accept-encoding" not in sent.headers  # no gzip of LIST pages on either side
    assert status == 200 and answer["body"] == {"status": {"observedGeneration": 3}}


def test_a_refusal_comes_back_as_its_status_and_text(kubeconfig: Path) -> None:
    with RecordingHttpServer(lambda r: (409, {"kind": "Status", "reason": "AlreadyExists"})) as s:
        _configure(kubeconfig, s.url)
        status, answer = _run(k8s.request("POST", PATH, {"kind": "Skill"}))
    assert status == 409 and len(s.requests) == 1
    assert isinstance(answer, str) and "AlreadyExists" in answer


def test_429_is_retried_after_the_seconds_asked_and_5xx_with_backoff(kubeconfig: Path) -> None:
    answers: list[tuple[int, Any] | tuple[int, Any, dict[str, str]]] = [
        (429, "slow down", {"Retry-After": "1"}),
        (503, "unavailable"),
        (200, {"kind": "Skill"}),
    ]

    def responder(request: HttpRequest) -> tuple[int, Any] | tuple[int, Any, dict[str, str]]:
        return answers.pop(0)

    with RecordingHttpServer(responder) as server:
        _configure(kubeconfig, server.url)
        started = time.monotonic()
        status, answer = _run(k8s.request("GET", PATH))
        waited = time.monotonic() - started
    assert (status, answer) == (200, {"kind": "Skill"})
    assert len(server.requests) == 3
    assert 0.8 + 0.16 <= waited < 3  # Retry-After 1 s (±20 %), then 0.2 s (±20 %)


def test_retries_stop_at_the_limit_with_the_last_answer(kubeconfig: Path) -> None:
    with RecordingHttpServer(lambda r: (500, "etcd timeout")) as server:
        _configure(kubeconfig, server.url, retries=2)
        status, answer = _run(k8s.request("GET", PATH))
    assert (status, answer) == (500, "etcd timeout")
    assert len(server.requests) == 3


def test_no_connection_is_an_api_error_once_retries_are_spent(kubeconfig: Path) -> None:
    with RecordingHttpServer() as probe:
        url = probe.url  # free, then closed: connections refused
    _configure(kubeconfig, url, retries=1)
    with pytest.raises(k8s.ApiError) as refused:
        _run(k8s.request("GET", PATH))
    assert refused.value.status == 0 and PATH in str(refused.value)


def test_the_write_gate_is_checked_before_every_attempt(kubeconfig: Path) -> None:
    leading = [True]

    def responder(request: HttpRequest) -> tuple[int, Any]:
        leading[0] = False  # the lease is lost while the first attempt is answered
        return 503, "unavailable"

    with RecordingHttpServer(responder) as server:
        _configure(kubeconfig, server.url)
        k8s.set_write_gate(lambda: None if leading[0] else "the lease is another's")
        try:
            with pytest.raises(k8s.NotLeader, match="the lease is another's"):
                _run(k8s.request("PUT", PATH, {"kind": "Skill"}))
            # Reads and the election's own requests are not fenced.
            status, _ = _run(k8s.request("GET", PATH, retries=0))
            unfenced, _ = _run(k8s.request("PUT", PATH, {}, fenced=False, retries=0))
        finally:
            k8s.set_write_gate(None)
    assert [r.method for r in server.requests] == ["PUT", "GET", "PUT"]
    assert status == unfenced == 503


class _Slow:
    """A responder that holds each request ``seconds`` and counts how many it holds at once
    (the server answers each request in a thread of its own)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0

    def __call__(self, request: HttpRequest) -> tuple[int, Any]:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.seconds if request.method != "POST" else 0)
        with self.lock:
            self.now -= 1
        return 200, {"path": request.path}


def test_at_most_workers_requests_are_in_flight(kubeconfig: Path) -> None:
    slow = _Slow(0.2)
    with RecordingHttpServer(slow) as server:
        _configure(kubeconfig, server.url, workers=3)

        async def burst() -> list[tuple[int, Any]]:
            return await asyncio.gather(*(k8s.request("GET", f"{PATH}-{i}") for i in range(9)))

        answers = _run(burst())
    assert [status for status, _ in answers] == [200] * 9
    assert slow.most == 3


def test_waiting_for_a_connection_is_not_a_timeout(kubeconfig: Path) -> None:
    slow = _Slow(0.4)  # each answer within the timeout; the third waits 0.8 s for its turn
    with RecordingHttpServer(slow) as server:
        _configure(kubeconfig, server.url, workers=1, request_timeout=0.6, retries=0)

        async def burst() -> list[tuple[int, Any]]:
            return await asyncio.gather(*(k8s.request("GET", f"{PATH}-{i}") for i in range(3)))

        answers = _run(burst())
    assert [status for status, _ in answers] == [200] * 3
    assert slow.most == 1 and len(server.requests) == 3


def test_a_request_the_server_does_not_answer_in_time_fails(kubeconfig: Path) -> None:
    with RecordingHttpServer(_Slow(1.0)) as server:
        _configure(kubeconfig, server.url, request_timeout=0.3, retries=0)
        with pytest.raises(k8s.ApiError) as slow:
            _run(k8s.request("GET", PATH))
    assert slow.value.status == 0 and len(server.requests) == 1


def test_a_runs_start_does_not_wait_behind_a_burst_of_requests(kubeconfig: Path) -> None:
    slow = _Slow(1.0)  # every GET is held 1 s, a POST answered at once
    with RecordingHttpServer(slow) as server:
        _configure(kubeconfig, server.url, workers=2)

        async def scenario() -> float:
            burst = [asyncio.create_task(k8s.request("GET", f"{PATH}-{i}")) for i in range(6)]
            await asyncio.sleep(0.2)  # the burst holds both connections, four wait
            started = time.monotonic()
            status, _ = await k8s.request_start("POST", "/apis/batch/v1/namespaces/a/jobs", {})
            took = time.monotonic() - started
            assert status == 200
            await asyncio.gather(*burst)
            return took

        took = _run(scenario())
    assert took < 0.5  # not the ~3 s the burst takes
    assert len(server.requests) == 7


def test_a_containers_log_is_read_as_text_and_a_gone_pod_is_none(kubeconfig: Path) -> None:
    def responder(request: HttpRequest) -> tuple[int, Any]:
        if "/pods/gone/" in request.path:
            return 404, {"kind": "Status", "reason": "NotFound"}
        return 200, "line one\nline two\n"

    with RecordingHttpServer(responder) as server:
        _configure(kubeconfig, server.url)
        text = _run(k8s.read_pod_log("team-a", "run-1", "runner"))
        gone = _run(k8s.read_pod_log("team-a", "gone", "runner"))
    assert (text, gone) == ("line one\nline two\n", None)
    sent = server.requests[0]
    assert sent.path == "/api/v1/namespaces/team-a/pods/run-1/log"
    assert sent.query == {"container": ["runner"]} and sent.headers["accept"] == "*/*"


def test_a_rotated_token_is_sent_once_the_headers_are_asked_again(
    kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The credentials' headers are reused for a while (asking runs the configuration's
    refresh hook, which reloads a kubeconfig); a token its hook rotated is sent after."""
    from swarmkit_operator.k8s import client

    monkeypatch.setattr(client, "AUTH_REUSE_SECONDS", 0.3)
    with RecordingHttpServer() as server:
        _configure(kubeconfig, server.url)
        cfg = client._config()
        asked: list[int] = []

        def rotate(config: Any) -> None:  # what an expiring exec or projected token does
            asked.append(1)
            if len(asked) > 1:
                config.api_key["BearerToken"] = "Bearer the-next-token"

        cfg.refresh_api_key_hook = rotate

        async def scenario() -> None:
            for _ in range(5):
                await k8s.request("GET", PATH)
            await asyncio.sleep(0.4)
            await k8s.request("GET", PATH)

        _run(scenario())
    sent = [r.headers["authorization"] for r in server.requests]
    assert sent == ["Bearer the-token"] * 5 + ["Bearer the-next-token"]
    assert len(asked) == 2


def test_a_kubeconfigs_proxy_url_carries_requests_and_watches(kubeconfig: Path) -> None:
    """``proxy-url`` of the kubeconfig's cluster (what kubectl honours): every request and
    watch goes through it. Here the proxy is a recording server and the apiserver's address
    one nothing listens on, so an answer proves the proxy carried the request."""
    with RecordingHttpServer() as closed:
        nowhere = closed.url

    def answer(request: HttpRequest) -> tuple[int, Any]:
        if request.query.get("watch") == ["true"]:
            return 200, '{"type": "ADDED", "object": {"kind": "Skill"}}\n'
        return 200, {"kind": "SkillList", "items": []}

    async def first_event() -> dict[str, Any]:
        async for event in k8s.stream(PATH, [("watch", "true")]):
            return event
        raise AssertionError("the watch ended without an event")

    with RecordingHttpServer(answer) as proxy:
        path = token_kubeconfig(kubeconfig, nowhere, **{"proxy-url": proxy.url})
        k8s.configure(kubeconfig=path, retries=0)
        status, listed = _run(k8s.request("GET", PATH))
        event = _run(first_event())
    assert (status, listed) == (200, {"kind": "SkillList", "items": []})
    assert event == {"type": "ADDED", "object": {"kind": "Skill"}}
    assert [r.path for r in proxy.requests] == [PATH, PATH]
    assert all(r.headers["authorization"] == "Bearer the-token" for r in proxy.requests)
