"""Fixtures of the reconciler tests: a fake API server and the operator's reconcile
controller running against it (:mod:`tests.support.fake_k8s`, :mod:`tests.support.reconciling`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

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


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    """Where a test's kubeconfig goes (``tests/support/kubeconfigs``); the real API client
    configured from it is torn down before and after."""
    from swarmkit_operator import k8s

    k8s.shutdown()
    yield tmp_path / "kubeconfig"
    k8s.shutdown()
