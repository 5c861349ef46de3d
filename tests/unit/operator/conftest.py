"""Fixtures of the reconciler tests: a fake API server and the operator's reconcile
controller running against it (:mod:`tests.support.fake_k8s`, :mod:`tests.support.reconciling`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.fake_k8s import FakeApi, fake_api
from tests.support.reconciling import Reconciling


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    return fake_api(monkeypatch)


@pytest.fixture
def fake(api: FakeApi) -> FakeApi:
    """The same fake, for tests whose own helper is called ``api``."""
    return api


@pytest.fixture
async def operator(api: FakeApi) -> AsyncIterator[Reconciling]:
    async with Reconciling(api) as running:
        yield running
