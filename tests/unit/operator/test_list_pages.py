"""A paged LIST asks for the next page from this page's bytes (``k8s.client.list_pages``):
the token read early must be the list's own, and a wrong guess must never change the pages.
(The formats the real apiserver sends: ``tests/integration/test_watch_streams.py``.)"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from swarmkit_operator import k8s
from swarmkit_operator.k8s import client


def custom_list(items: list[dict[str, Any]], token: str) -> bytes:
    """A custom resource's list as the apiserver encodes it (an unstructured object: keys
    sorted, the list's metadata last), an item carrying a ``metadata`` of its own."""
    meta = {"continue": token, "resourceVersion": "7"} if token else {"resourceVersion": "7"}
    doc = {"apiVersion": "swarmkit.dev/v1alpha1", "items": items, "kind": "SkillList"}
    return json.dumps({**doc, "metadata": meta}, separators=(",", ":")).encode()


def item(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "continue": "not-the-list-token"}, "spec": {}}


def test_the_token_is_read_from_either_end_of_the_bytes() -> None:
    assert client.continue_token(custom_list([item("a")], "tok-1")) == "tok-1"
    assert client.continue_token(custom_list([item("a")], "")) == ""
    built_in = b'{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"continue":"c2"},"items":[]}'
    assert client.continue_token(built_in) == "c2"
    # Anything else: not found, so the page is decoded before the next is asked for.
    assert client.continue_token(b'{"items":[{"metadata":{"continue":"x"}}]}') is None
    assert client.continue_token(b"not json") is None


def scripted(pages: dict[str, bytes], asked: list[str]) -> Any:
    async def request_page(
        path: str, query: list[tuple[str, str]], accept: str = ""
    ) -> tuple[int, bytes | str]:
        token = dict(query).get("continue", "")
        asked.append(token)
        await asyncio.sleep(0)
        if token not in pages:
            return 410, "expired"
        return 200, pages[token]

    return request_page


async def pages_of(path: str) -> list[str]:
    return [i["metadata"]["name"] async for p in k8s.list_pages(path, []) for i in p["items"]]


async def test_the_next_page_is_asked_for_before_this_one_is_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pages = {
        "": custom_list([item("a"), item("b")], "t1"),
        "t1": custom_list([item("c")], "t2"),
        "t2": custom_list([item("d")], ""),
    }
    asked: list[str] = []
    monkeypatch.setattr(client, "request_page", scripted(pages, asked))
    decoded: list[Any] = []
    real_loads = client.loads

    def loads(data: bytes | str) -> Any:
        # Decoding runs in a thread: give the next page's request a second to be made
        # meanwhile (a sequential reader would make it only after this returns).
        seen = len(decoded) + 1
        deadline = time.monotonic() + 1.0
        while len(asked) < min(seen + 1, len(pages)) and time.monotonic() < deadline:
            time.sleep(0.001)
        decoded.append(len(asked))  # how many pages were asked for while this one decoded
        return real_loads(data)

    monkeypatch.setattr(client, "loads", loads)
    assert await pages_of("/x") == ["a", "b", "c", "d"]
    assert asked == ["", "t1", "t2"]
    assert decoded == [2, 3, 3]  # page 1 decoded once page 2 was on its way


async def test_a_wrong_early_token_is_dropped_and_the_decoded_one_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A format read wrongly from the bytes: the early request is dropped, and the pages are
    # still exactly the list's.
    pages = {"": custom_list([item("a")], "t1"), "t1": custom_list([item("b")], "")}
    asked: list[str] = []
    monkeypatch.setattr(client, "request_page", scripted(pages, asked))
    monkeypatch.setattr(client, "continue_token", lambda raw: "wrong")
    assert await pages_of("/x") == ["a", "b"]
    assert asked[:2] == ["", "wrong"] and asked[2] == "t1"


async def test_a_failed_page_fails_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = {"": custom_list([item("a")], "gone")}
    monkeypatch.setattr(client, "request_page", scripted(pages, []))
    with pytest.raises(k8s.ApiError, match="410"):
        await pages_of("/x")
