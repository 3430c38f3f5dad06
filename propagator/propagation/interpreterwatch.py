"""The platform's ResourceInterpreters on the hub, compiled into the rules in force as they
change, each told in its status whether it compiled (and if not, which expression, where
and why)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from api.common import API_VERSION
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.informer import Informer
from propagator.conditions import condition, now_iso, status_changed
from propagator.interpreter.registry import Compiled, Interpreters
from propagator.observability.metrics import Metrics
from propagator.runtime.ownership import Hold, always
from propagator.runtime.shardplan import interpreter_key
from propagator.runtime.statuswrites import status_not_written
from propagator.runtime.workqueue import WorkQueue

log = logging.getLogger(__name__)


def compiled_status(obj: dict[str, Any], compiled: Compiled, now: str) -> dict[str, Any]:
    """The status telling whether ``obj``'s rules compiled."""
    generation = (obj.get("metadata") or {}).get("generation")
    previous = (obj.get("status") or {}).get("conditions")
    if compiled.error is None:
        group, kind = compiled.target
        message = f"in force for {kind}.{group}" if group else f"in force for {kind}"
        cond = condition("Compiled", True, "Compiled", message, generation, previous, now)
    else:
        cond = condition("Compiled", False, "Invalid", compiled.error, generation, previous, now)
    return {"observedGeneration": generation, "conditions": [cond]}


class InterpreterWatch:
    """Keeps ``interpreters`` in line with the hub's ResourceInterpreters; ``changed()`` is
    called when the rules in force changed (every application is judged again)."""

    def __init__(
        self,
        hub: KubeConnection,
        interpreters: Interpreters,
        metrics: Metrics,
        changed: Callable[[], None],
    ) -> None:
        self.hub = hub
        self.interpreters = interpreters
        self.metrics = metrics
        self.changed = changed
        self.informer = Informer(hub, API_VERSION, "ResourceInterpreter", self._on_event)
        self.results: dict[str, Compiled] = {}
        self.queue = WorkQueue(max_delay_s=30.0)
        self.hold: Hold = always
        """``hold('interpreter/<name>')``: whether this replica writes its status."""

    def _on_event(self, event: str, old: Any, new: Any) -> None:
        name = str((new or old)["metadata"]["name"])
        if event == "DELETED":
            self.results.pop(name, None)
            self.interpreters.remove(name)
            self.changed()
            return
        if old is not None and (old.get("spec"), old["metadata"].get("generation")) == (
            new.get("spec"),
            new["metadata"].get("generation"),
        ):
            return  # only its status changed (our own write)
        before = self.interpreters.generation
        self.results[name] = compiled = self.interpreters.set(new)
        if compiled.error is not None:
            log.warning("ResourceInterpreter %s does not compile: %s", name, compiled.error)
        if self.interpreters.generation != before:
            self.changed()
        self.queue.add(name)

    async def run(self) -> None:
        """Write each ResourceInterpreter's status after it changed."""
        await self.queue.serve(
            self._write, (ApiError,), status_not_written("ResourceInterpreter", log)
        )

    async def _write(self, name: str) -> None:
        with self.hold(interpreter_key(name)) as mine:
            if mine:
                await self._write_mine(name)

    async def _write_mine(self, name: str) -> None:
        obj, compiled = self.informer.get(name), self.results.get(name)
        if obj is None or compiled is None:
            return
        status = compiled_status(obj, compiled, now_iso())
        if not status_changed(obj.get("status"), status):
            return  # a condition kept keeps its lastTransitionTime
        self.metrics.status_writes.labels("ResourceInterpreter status").inc()
        await self.hub.merge_patch(
            API_VERSION, "ResourceInterpreter", name, {"status": status}, subresource="status"
        )
