"""The operator's reconcile controller running against :class:`~tests.support.fake_k8s.FakeApi`.

What runs is the operator's own: the composition root's wiring (every ``@index``,
``@reconciler`` and ``@on_event`` mark), the start-up LIST into the indexes, one reflector
per watched stream, the controller's workers, its status writes and Events. Only the API
server is the fake. A test creates and edits objects in the fake the way a user would
with kubectl, calls :meth:`Reconciling.settle`, and reads back what a user would see:
status, conditions, rendered ConfigMaps, Events.

Built here and nowhere else, so a change to how the operator is put together touches one
function (:meth:`Reconciling.start`)::

    async with Reconciling(fake) as operator:
        fake.apply_spec("Agent", "ns", "a", {"skills": []})
        await operator.settle()
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace, TracebackType
from typing import Any, cast

import kopf

from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.handlers import root
from swarmkit_operator.handlers.common import App
from swarmkit_operator.indexes import Listing, populate
from swarmkit_operator.reconcile.controller import Controller, ControllerSettings, Services
from swarmkit_operator.runtime import Manager, Runnable

from .fake_k8s import FakeApi

#: How long :meth:`Reconciling.settle` waits by default (everything is in memory: seconds
#: only when the machine is loaded).
SETTLE_SECONDS = 20.0


class Reconciling:
    """The reconcile controller over a fake API (module docstring)."""

    def __init__(
        self,
        api: FakeApi,
        config: OperatorConfig | None = None,
        namespaces: tuple[str, ...] = (),
        **controller: Any,
    ) -> None:
        self.api = api
        self.config = config or OperatorConfig()
        self.namespaces = namespaces
        # Quick retries and no grace: a test waits for the outcome, not for the clock.
        self.options = {"workers": 4, "defer_delay": 0.05, "gc_grace": 0.0} | controller
        self.ctl: Controller | None = None
        self.manager: Manager | None = None

    async def __aenter__(self) -> Reconciling:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> Controller:
        """Build and start the controller as the composition root does (its steps 2, 5, 8
        and 9: the kinds' and the shared modules' streams, the reconcile runnable), without
        the controllers that only read the kinds' indexes (Runs, gateways, mailbox delivery,
        skill library): their event functions would need the whole application context."""
        wired = root.wiring(modules=(*root.SHARED, *root.kind_modules(root.KINDS)))
        manager = Manager.build(None)
        settings = ControllerSettings(
            namespaces=self.namespaces, resync_seconds=0.0, **self.options
        )
        ctl = wired.controller(self.config, settings, Services(leadership=manager.leadership))
        listings: list[Listing] = []
        await populate(ctl.indexes, self.namespaces, listings=listings)
        # Only the two fields the streams and the shared/kind event functions read.
        app = cast(App, SimpleNamespace(controller=ctl, manager=manager))
        root._open_streams(kopf.OperatorSettings(), app, wired.events, listings)

        async def start_reconcile() -> None:
            await ctl.start()
            ctl.enqueue_unsettled()

        manager.add(Runnable("reconcile", start_reconcile))
        await manager.start()
        self.manager, self.ctl = manager, ctl
        return ctl

    async def stop(self) -> None:
        if self.manager is not None:
            await self.manager.stop()
            self.manager = None
        if self.ctl is not None:
            await self.ctl.stop()
            self.ctl = None

    async def restart(self) -> Controller:
        """A new operator process over the same API (nothing remembered in memory)."""
        await self.stop()
        return await self.start()

    async def settle(self, timeout: float = SETTLE_SECONDS) -> None:
        """Wait until nothing changes any more: no write for a while, the work queue empty
        and idle. Fails naming the queued keys if it does not happen in ``timeout``."""
        assert self.ctl is not None, "start() first"
        deadline = time.monotonic() + timeout
        quiet = 0
        seen = -1
        while quiet < 5:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"not settled after {timeout}s: {len(self.ctl.queue)} key(s) queued, "
                    f"{self.ctl.queue.busy} busy, store at revision {self.api.revision}"
                )
            await asyncio.sleep(0.02)
            idle = len(self.ctl.queue) == 0 and self.ctl.queue.busy == 0
            quiet = quiet + 1 if idle and seen == self.api.revision else 0
            seen = self.api.revision
