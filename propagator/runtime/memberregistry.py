"""The member registry: per member cluster one unit that holds everything the controller
keeps about it, started and stopped together.

A unit has the member's monitor (its connection and health, made from the member's
kubeconfig Secret and probed by the fleet manager, and the watches of its nodes and pods
that capacity is summed from), its circuit breaker, its object caches (one label-filtered
watch per kind propagated there, or one per namespace on a member limited to some, started
the first time a sync of the kind is queued there), what was last applied there, and its
own sync queue served by a few workers of its own. A unit starts all of its watches and
workers, and stops them and closes its connection, as one: a new kubeconfig (or
spec.namespaces) makes a new unit. A slow or dead member only holds its own workers: its
keys wait in its queue, not in anyone else's.

The registry follows the fleet manager's monitors when told they changed (no polling).
Watches are tasks in the event loop (no thread); their events reach ``on_object`` there.
Units are keyed by cluster name, so the members could be sharded across controller
replicas by that key.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from fleet.circuit import CircuitBreaker
from fleet.member import MemberMonitor
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.informer import Informer
from kube.keys import KindKey, ObjectKey
from propagator.runtime.workqueue import WorkQueue

log = logging.getLogger(__name__)

Object = dict[str, Any]

NAMESPACES: KindKey = ("v1", "Namespace")
LIMIT_RANGES: KindKey = ("v1", "LimitRange")
"""Cached whole: their defaults are what a container without requests asks there."""
UNLABELLED_KINDS = frozenset({LIMIT_RANGES})
"""Kinds whose caches hold every object, not only those carrying our label. Namespaces
are not among them: MemberClusters sharing an API server (or a member with many
namespaces) would each see every namespace there, and a sync learns whether one it
needs exists by creating it."""


def cached_form(obj: Object, api_version: str, kind: str) -> Object:
    """What a cache keeps of an object: all but managedFields (large, never read), with
    its apiVersion and kind (listed items carry none); every key, and the metadata's
    names, labels and annotations, interned (a decoded object holds its own copy of each:
    two thirds of a small object's memory, the same strings on every object of every
    member)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        bare: Object = _interned({**obj, "apiVersion": api_version, "kind": kind})
        return bare
    kept: Object = {}
    for key, value in meta.items():
        if key == "managedFields":
            continue
        if key in ("labels", "annotations") and isinstance(value, dict):
            value = {sys.intern(k): _short(v) for k, v in value.items()}
        elif key == "namespace":
            value = _short(value)
        kept[sys.intern(key)] = value
    out: Object = _interned({k: v for k, v in obj.items() if k != "metadata"})
    out["apiVersion"], out["kind"] = sys.intern(api_version), sys.intern(kind)
    out["metadata"] = kept
    return out


_SHORT = 253
"""Longest value interned: names, label values, short annotations (a longer one is
rarely the same on two objects)."""


def _short(value: Any) -> Any:
    return sys.intern(value) if isinstance(value, str) and len(value) <= _SHORT else value


_INTERN_DEPTH = 16
"""Levels whose keys are interned; deeper ones are kept as decoded (a hostile member's
deeply nested object costs no recursion beyond this)."""


def _interned(value: Any, depth: int = 0) -> Any:
    """``value`` with the dict keys of its first levels interned (a copy of those dicts
    and lists)."""
    if depth >= _INTERN_DEPTH:
        return value
    if isinstance(value, dict):
        return {
            sys.intern(k) if isinstance(k, str) else k: _interned(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_interned(v, depth + 1) for v in value]
    return value


@dataclass(slots=True)
class Applied:
    """What the controller last wrote for one object on one member."""

    desired: Object
    """The stamped object as applied."""
    fingerprint: str
    """The member's answer projected onto the applied fields (see propagation.drift)."""
    generation: int | None = None
    """The object's metadata.generation in the member's answer: a cache holding an older
    one has not seen this write yet."""
    resource_version: str | None = None
    """The object's metadata.resourceVersion in the member's answer: a cached version
    with it is the one this write left, in line without a comparison."""


class AppliedObjects:
    """What the controller last wrote on one member, by object, and by application (a
    sync looks at its own application's writes, not at every one made there)."""

    def __init__(self) -> None:
        self._by_key: dict[ObjectKey, tuple[str, Applied]] = {}
        """By object: the application that wrote it, and what it wrote."""
        self._by_app: dict[str, set[ObjectKey]] = {}

    def get(self, key: ObjectKey) -> Applied | None:
        found = self._by_key.get(key)
        return found[1] if found is not None else None

    def record(self, app: str, key: ObjectKey, applied: Applied) -> None:
        """``applied`` is what application ``app`` (namespace/name) last wrote as ``key``."""
        self.forget(key)
        self._by_key[key] = (app, applied)
        self._by_app.setdefault(app, set()).add(key)

    def forget(self, key: ObjectKey) -> None:
        """The object is gone (deleted by a sync)."""
        found = self._by_key.pop(key, None)
        if found is not None and (keys := self._by_app.get(found[0])) is not None:
            keys.discard(key)
            if not keys:
                del self._by_app[found[0]]

    def of(self, app: str) -> list[tuple[ObjectKey, Applied]]:
        """What application ``app`` last wrote there, by object."""
        return [(key, self._by_key[key][1]) for key in sorted(self._by_app.get(app, ()))]

    def __len__(self) -> int:
        return len(self._by_key)


@dataclass
class Member:
    """One member cluster's unit."""

    name: str
    connection: KubeConnection
    breaker: CircuitBreaker
    queue: WorkQueue
    monitor: MemberMonitor | None = None
    """The fleet manager's view of the member (health, discovery, capacity), whose node
    and pod watches this unit runs; ``connection`` is its connection."""
    caches: dict[KindKey, Informer] = field(default_factory=dict)
    applied: AppliedObjects = field(default_factory=AppliedObjects)
    namespaces: set[str] = field(default_factory=set)
    """Namespaces known to exist there: created by a sync, or found to exist when creating
    one was refused (objects in those may exist unstamped). No cache watches namespaces
    unless an application brings one."""
    stopped: bool = False
    scopes: list[anyio.CancelScope] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.namespaces.update(self.allowed_namespaces)  # they must exist: none is created

    def cached(self, api_version: str, kind: str) -> Informer | None:
        return self.caches.get((api_version, kind))

    @property
    def allowed_namespaces(self) -> tuple[str, ...]:
        """The only namespaces it may be used in (MemberCluster spec.namespaces; empty:
        the whole cluster). Its caches watch each of them."""
        return self.monitor.namespaces if self.monitor is not None else ()


Caches = Callable[[Member, Iterable[KindKey], float], Awaitable[dict[KindKey, Informer]]]
"""The member's caches of the kinds, each listed, within the timeout (see
:meth:`MemberRegistry.caches_synced`)."""
SyncFn = Callable[[Member, str], Awaitable[None]]
"""Syncs one key (an application) on one member; runs in the member's workers."""
ObjectFn = Callable[[Member, str, Object | None, Object | None], None]
"""Called in the event loop as on_object(member, event, old, new) for each cache change."""
PodsFn = Callable[[Member, str], None]
"""Called in the event loop as on_pods(member, namespace) when a pod there comes, goes or
starts being deleted (the fleet manager's pod watch, which the unit runs)."""


class MemberRegistry:
    """Every member's unit; runs until cancelled."""

    def __init__(
        self,
        *,
        selector: Callable[[str], str],
        index: Callable[[Object], str | None],
        sync: SyncFn,
        on_object: ObjectFn,
        on_added: Callable[[Member], None],
        on_pods: PodsFn | None = None,
        workers_per_member: int,
        circuit_failure_threshold: int,
        circuit_cool_down_s: float,
        requeue_max_delay_s: float,
    ) -> None:
        self._selector = selector
        """The label selector of a member's caches (by member name): our objects
        propagated through it."""
        self._index = index
        """What a member's caches index their objects by (Informer.index)."""
        self._sync = sync
        self._on_object = on_object
        self._on_added = on_added
        self._on_pods = on_pods
        self._workers = workers_per_member
        self._breaker_args = (circuit_failure_threshold, circuit_cool_down_s)
        self._max_delay_s = requeue_max_delay_s
        self.units: dict[str, Member] = {}
        self._breakers: dict[str, CircuitBreaker] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        self._pending: Mapping[str, MemberMonitor] | None = None

    def get(self, name: str) -> Member | None:
        return self.units.get(name)

    def breaker(self, name: str) -> CircuitBreaker:
        """The member's breaker; it outlives connection changes (a new Secret)."""
        if name not in self._breakers:
            threshold, cool_down = self._breaker_args
            self._breakers[name] = CircuitBreaker(name, threshold, cool_down)
        return self._breakers[name]

    # -- following the fleet manager ------------------------------------------------------

    def sync(self, monitors: Mapping[str, MemberMonitor]) -> None:
        """Match the units to the monitors' connections (in the event loop): a unit per
        member with a connection; a changed connection makes a new unit."""
        if self._task_group is None:
            self._pending = monitors  # before run(): taken up when it starts
            return
        connected = {n: m for n, m in monitors.items() if m.connection is not None}
        for name in list(self.units):
            if connected.get(name) is not self.units[name].monitor:
                member = self.units.pop(name)
                self._stop(member)
                self._task_group.start_soon(member.connection.close)
                if name not in monitors:
                    self._breakers.pop(name, None)
        for name, monitor in connected.items():
            if name not in self.units:
                self._start(name, monitor)

    def _start(self, name: str, monitor: MemberMonitor) -> None:
        assert self._task_group is not None
        assert monitor.connection is not None
        member = Member(
            name,
            monitor.connection,
            self.breaker(name),
            WorkQueue(max_delay_s=self._max_delay_s),
            monitor,
        )
        self.units[name] = member
        if self._on_pods is not None:
            monitor.pods_changed = functools.partial(self._on_pods, member)
        self._task_group.start_soon(self._serve, member)
        for informer in monitor.informers:
            self._task_group.start_soon(self._run_informer, member, informer)
        self._on_added(member)

    def _stop(self, member: Member) -> None:
        member.stopped = True
        member.queue.shut_down()
        for scope in member.scopes:
            scope.cancel()
        informers = list(member.caches.values())
        if member.monitor is not None:
            member.monitor.pods_changed = None
            informers.extend(member.monitor.informers)
        for informer in informers:
            informer.stop()

    async def _scoped(self, member: Member, fn: Callable[[], Awaitable[None]]) -> None:
        """Run ``fn`` until it returns or the member's unit stops."""
        with anyio.CancelScope() as scope:
            member.scopes.append(scope)
            if not member.stopped:
                await fn()

    async def _serve(self, member: Member) -> None:
        async def workers() -> None:
            async with anyio.create_task_group() as tg:
                for _ in range(self._workers):
                    tg.start_soon(self._worker, member)

        await self._scoped(member, workers)

    async def _worker(self, member: Member) -> None:
        while (key := await member.queue.get()) is not None:
            try:
                await self._sync(member, key)
            except Exception:
                log.exception("%s: sync of %s failed", member.name, key)
                member.queue.retry(key)
            finally:
                member.queue.done(key)

    # -- caches ---------------------------------------------------------------------------

    def queue(self, member: Member, key: str, kinds: Iterable[KindKey]) -> None:
        """Queue a sync of ``key`` on ``member`` and start the member's caches of ``kinds``
        (what the sync is judged from) now, not at its turn: they list while it waits, and
        a cache's first listing passes over every object of its kind the member's API
        server holds, which the writes queued before it only add to. Their first fill may
        be of any state the server has at hand (no read of its storage first): the sync
        writes an object they lack as a create, refused and read if it exists, and what is
        newer comes as events."""
        for kind in kinds:
            self.cache(member, *kind, first_from_any_state=True)
        member.queue.add(key)

    def cache(
        self, member: Member, api_version: str, kind: str, first_from_any_state: bool = False
    ) -> Informer:
        """The member's watch cache of ``kind`` (our objects propagated through it; every
        LimitRange), started on first use (see :attr:`Informer.first_from_any_state`)."""
        informer = member.cached(api_version, kind)
        if informer is None:
            assert self._task_group is not None

            def changed(event: str, old: Object | None, new: Object | None) -> None:
                self._on_object(member, event, old, new)

            whole = (api_version, kind) in UNLABELLED_KINDS
            informer = Informer(
                member.connection,
                api_version,
                kind,
                changed,
                namespaces=member.allowed_namespaces,
                label_selector=None if whole else self._selector(member.name),
                transform=lambda obj: cached_form(obj, api_version, kind),
                index=None if whole else self._index,
                first_from_any_state=first_from_any_state,
            )
            member.caches[api_version, kind] = informer
            self._task_group.start_soon(self._run_informer, member, informer)
        return informer

    async def _run_informer(self, member: Member, informer: Informer) -> None:
        await self._scoped(member, informer.run)

    async def caches_synced(
        self, member: Member, kinds: Iterable[KindKey], timeout_s: float
    ) -> dict[KindKey, Informer]:
        """The caches of ``kinds``, each listed (or known not to be served); raises a
        retryable ApiError naming the first kind still not listed after ``timeout_s``."""
        caches = {k: self.cache(member, *k) for k in kinds}
        with anyio.move_on_after(timeout_s):
            for informer in caches.values():
                await informer.wait_synced(or_not_served=True)
            return caches
        waiting = next(i for i in caches.values() if not (i.synced or i.not_served))
        raise ApiError(
            member.name,
            f"the watch of {waiting.kind} has not listed within {timeout_s:g}s"
            + (f": {waiting.last_error}" if waiting.last_error else ""),
            retryable=True,
        )

    # -- running --------------------------------------------------------------------------

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the members until cancelled."""
        try:
            async with anyio.create_task_group() as tg:
                self._task_group = tg
                if self._pending is not None:
                    self.sync(self._pending)
                task_status.started()
                await anyio.sleep_forever()
        finally:
            for member in self.units.values():
                self._stop(member)
            with anyio.move_on_after(2, shield=True):
                for member in self.units.values():
                    await member.connection.close()
            self.units.clear()
            self._task_group = None
