"""The application keys' queue and the workers that reconcile them.

A key is planned again (resolve, schedule, render) when something asked for it or its
replan is due, else only its status is refreshed from the member syncs' results. A key is
never reconciled twice at once; a failed reconcile comes back after the queue's backoff
(:mod:`kube.retry`'s rule) and is planned again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import anyio

from kube.errors import ApiError
from kube.informer import Informer
from propagator.observability.metrics import Metrics
from propagator.propagation.plan import Requeue
from propagator.propagation.reconcile import Reconciler
from propagator.runtime.ownership import Hold, always
from propagator.runtime.workqueue import WorkQueue

# The controller's logger, as before the workers had a module of their own: its lines and
# any filter on them keep their source.
log = logging.getLogger("propagator.propagation.controller")


class ReconcileWorkers:
    """``workers`` reconcilers of the keys of ``apps`` (the hub's ApplicationPropagations);
    ``gone``: called with a key whose application is no longer there."""

    def __init__(
        self,
        apps: Informer,
        reconciler: Reconciler,
        metrics: Metrics,
        workers: int,
        max_delay_s: float,
        gone: Callable[[str], None],
        hold: Hold = always,
        released: Callable[[str], None] = lambda _key: None,
    ) -> None:
        """``hold``: whether a key is this replica's (shards); ``released``: called with a
        key that is not (its local state goes)."""
        self.hold = hold
        self.released = released
        self.apps = apps
        self.reconciler = reconciler
        self.metrics = metrics
        self.workers = workers
        self.gone = gone
        self.queue = WorkQueue(max_delay_s=max_delay_s)
        self._replan: set[str] = set()
        self._replan_due: dict[str, float] = {}
        """Keys to plan again once time.monotonic() reaches the value (a toleration or a
        failback period running out), whatever status refreshes come first."""
        self._started = False
        self._done = anyio.Event()

    def replan(self, keys: Iterable[str]) -> None:
        """Plan ``keys`` again, at once."""
        for key in keys:
            self._replan.add(key)
            self.queue.add(key)

    def refresh(self, key: str, delay_s: float) -> None:
        """Refresh ``key``'s status after ``delay_s`` (0: at once; a refresh already
        coming within that long stands)."""
        if delay_s:
            self.queue.add_soon(key, delay_s)
        else:
            self.queue.add(key)

    def forget(self, key: str) -> None:
        self._replan.discard(key)
        self._replan_due.pop(key, None)

    async def run(self) -> None:
        """Reconcile until the queue shuts down."""
        self._started = True
        try:
            async with anyio.create_task_group() as tg:
                for _ in range(self.workers):
                    tg.start_soon(self._worker)
        finally:
            self._done.set()

    async def drain(self, grace_s: float) -> None:
        """Take no new work; give reconciles in flight ``grace_s`` to finish (and write
        their status)."""
        self.queue.shut_down()
        if not self._started:
            return  # never led, or still starting: nothing in flight
        with anyio.move_on_after(grace_s):
            await self._done.wait()

    async def _worker(self) -> None:
        while (key := await self.queue.get()) is not None:
            try:
                await self._reconcile(key)
            finally:
                self.queue.done(key)

    async def _reconcile(self, key: str) -> None:
        with self.hold(key) as mine:
            if mine:
                await self._reconcile_mine(key)
            else:
                self.released(key)

    async def _reconcile_mine(self, key: str) -> None:
        obj = self.apps.get(key)
        if obj is None:
            self.gone(key)
            return
        due = self._replan_due.get(key)
        replan = key in self._replan or (due is not None and due <= time.monotonic())
        self._replan.discard(key)
        if replan:
            self._replan_due.pop(key, None)
        try:
            result = await self.reconciler.reconcile(obj, replan=replan)
        except Exception as exc:
            cause = exc.cause if isinstance(exc, Requeue) else exc
            if isinstance(exc, ApiError):  # the hub said no (e.g. a conflict): retry
                log.warning("%s: reconcile failed: %s", key, exc)
            elif not isinstance(exc, Requeue):  # (a Requeue was logged, and reported)
                log.exception("%s: reconcile failed", key)
            self.metrics.reconciles.labels("error").inc()
            self.metrics.reconcile_errors.labels(type(cause).__name__).inc()
            self._replan.add(key)
            self.queue.retry(key)
            return
        if replan:
            self.metrics.reconciles.labels("success").inc()
        self.queue.forget(key)
        if result.replan_after_s is not None:
            at = time.monotonic() + result.replan_after_s
            self._replan_due[key] = min(at, self._replan_due.get(key, at))
            self.queue.add_after(key, result.replan_after_s)
        if result.refresh_after_s is not None:
            self.queue.add_after(key, result.refresh_after_s)
