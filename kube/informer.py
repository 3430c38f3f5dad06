"""List+watch of one kind into a local cache (what client-go calls an informer), async.

The first list fills the cache (on a server that streams lists, the watch's own initial
events do, saving a request per kind and member); the watch continues from its
resourceVersion with bookmarks; ``410 Gone`` (the server no longer has that version) or a
broken stream leads to a fresh list, and the cache is replaced with what the server has,
reporting the differences as events. Runs as a task in the event loop (no thread); the
handler is called there too, and must not block.

One class over the size the codebase keeps to: its cache, index, relist and watch loop
share one state (the versions, the namespaces listed, the sync flag) that a split would
hand back and forth on every event.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from kube.connection import KubeConnection
from kube.discovery import UnknownKind
from kube.errors import ApiError
from kube.keys import cache_key
from kube.redact import unforeseen

log = logging.getLogger(__name__)

Object = dict[str, Any]
Handler = Callable[[str, Object | None, Object | None], None]
"""Called as handler(event, old, new) with event ADDED, MODIFIED or DELETED."""

WATCH_TIMEOUT_S = (300, 600)
"""A watch asks the server to end it after a random time in this range (as client-go
does): a shorter watch makes every member's watches start over more often, which at
1,000 members (~5,000 watches) costs the controller a good part of a core at rest."""
QUIET_S = 90.0
"""A watch that brings no event (not even a bookmark, sent about every minute) for this
long is started again from its last version: its connection may be gone without a word,
or its server may trickle bytes that make no event."""
OVERDUE_S = 60.0
"""A watch still open this long after the time it asked the server to end it is ended
(and started again from its last version) by us."""
SHORT_WATCH_S = 1.0
"""A watch that the server ended normally sooner than this is followed by a backoff, as
after an error (client-go's reflector does the same): a server that ends every watch at
once would otherwise get them back as fast as they can be made."""
_MAX_BACKOFF_S = 30.0
BACK_CHECK_S = 0.5
"""While backing off from an unreachable server: how often to look whether it answers."""


@dataclass
class Informer:
    """A cache of every ``kind`` object (in ``namespace``, or in each of ``namespaces``;
    matching ``label_selector``)."""

    connection: KubeConnection
    api_version: str
    kind: str
    handler: Handler
    namespace: str | None = None
    namespaces: tuple[str, ...] = ()
    """Several namespaces (instead of ``namespace``): a list and watch of each, as one
    cache, listed once each has. Where credentials reach only these, a watch of the whole
    cluster would be refused; and an API server offers each event only to the watches of
    its namespace and to those of the whole cluster. A kind that turns out cluster-scoped
    is not watched: its cache stays empty."""
    label_selector: str | None = None
    field_selector: str | None = None
    transform: Callable[[Object], Object] | None = None
    """Applied to every object before caching (e.g. keep only the fields used)."""
    index: Callable[[Object], str | None] | None = None
    """A value per cached object (None: none) under which :meth:`indexed` finds it
    without a pass over the whole cache."""
    first_from_any_state: bool = False
    """The first fill may be of any state the server has at hand (resourceVersion 0: from
    its watch cache, without reading the latest version from its storage first), as
    client-go's informers list; what came after it comes as events. For caches whose users
    tolerate a state a moment old. Later fills are of the latest."""
    cache: dict[str, Object] = field(default_factory=dict)
    """By :func:`cache_key`; changed by the informer only (its index follows it)."""
    last_error: str | None = None
    not_served: bool = False
    """The server does not serve the kind (it is retried with backoff all the same)."""
    _synced: bool = False
    _settled: anyio.Event | None = None
    _scope: anyio.CancelScope | None = None
    _stopped: bool = False
    _indexed: dict[str, dict[str, Object]] = field(default_factory=dict)
    _listed: set[str | None] = field(default_factory=set)
    """The namespaces listed so far (None: the whole cluster)."""

    def __post_init__(self) -> None:
        if self.namespace is not None and self.namespaces:
            raise ValueError("an informer has a namespace or namespaces, not both")

    @property
    def synced(self) -> bool:
        """Whether the first list has filled the cache."""
        return self._synced

    def mark_synced(self) -> None:
        self._synced = True
        self._settle()

    def _settle(self) -> None:
        """Wake whoever waits for the cache to list (or the kind to be refused)."""
        if self._settled is not None:
            self._settled.set()
            self._settled = None

    async def wait_synced(self, or_not_served: bool = False) -> None:
        """Return once the first list has filled the cache (or, with ``or_not_served``,
        once the server said it does not serve the kind)."""
        while not (self._synced or (or_not_served and self.not_served)):
            if self._settled is None:
                self._settled = anyio.Event()
            await self._settled.wait()

    def snapshot(self) -> list[Object]:
        """The cached objects."""
        return list(self.cache.values())

    def get(self, key: str) -> Object | None:
        return self.cache.get(key)

    def indexed(self, value: str) -> list[Object]:
        """The cached objects whose :attr:`index` value is ``value``."""
        return list(self._indexed.get(value, {}).values())

    def _put(self, key: str, obj: Object) -> Object | None:
        """Cache ``obj`` under ``key``; returns what it replaced."""
        before = self.cache.get(key)
        self.cache[key] = obj
        if self.index is not None:
            if before is not None:
                self._unindex(key, before)
            self._add_to_index(key, obj)
        return before

    def _pop(self, key: str) -> Object | None:
        before = self.cache.pop(key, None)
        if before is not None and self.index is not None:
            self._unindex(key, before)
        return before

    def _add_to_index(self, key: str, obj: Object) -> None:
        assert self.index is not None
        if (value := self.index(obj)) is not None:
            self._indexed.setdefault(value, {})[key] = obj

    def _unindex(self, key: str, obj: Object) -> None:
        assert self.index is not None
        value = self.index(obj)
        if value is not None and (same := self._indexed.get(value)) is not None:
            same.pop(key, None)
            if not same:
                del self._indexed[value]

    def stop(self) -> None:
        """End :meth:`run` (now if it runs, at once if it has not started)."""
        self._stopped = True
        if self._scope is not None:
            self._scope.cancel()

    def _params(self) -> dict[str, Any]:
        return {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}

    def _first_fill(self, namespace: str | None) -> dict[str, Any]:
        """What makes the first fill one of any state (see :attr:`first_from_any_state`)."""
        first = self.first_from_any_state and namespace not in self._listed
        return {"resourceVersion": "0"} if first else {}

    def _prepare(self, obj: Object) -> Object:
        return self.transform(obj) if self.transform else obj

    def _replace(self, fresh: dict[str, Object], namespace: str | None = None) -> None:
        """Make ``fresh`` (everything the server has in ``namespace``, None: everything)
        the cache's share of it, emitting the differences."""
        if self.namespaces:
            old = {k: o for k, o in self.cache.items() if _namespace(o) == namespace}
            self.cache = {k: o for k, o in self.cache.items() if k not in old} | fresh
        else:
            old, self.cache = self.cache, fresh
        if self.index is not None:
            self._indexed = {}
            for key, obj in self.cache.items():
                self._add_to_index(key, obj)
        for key, obj in fresh.items():
            before = old.get(key)
            if before is None:
                self.handler("ADDED", None, obj)
            elif _rv(before) != _rv(obj):
                self.handler("MODIFIED", before, obj)
        for key, obj in old.items():
            if key not in fresh:
                self.handler("DELETED", obj, None)
        self.not_served = False
        self._listed.add(namespace)
        if len(self._listed) >= max(1, len(self.namespaces)):
            self.mark_synced()

    async def _relist(self, namespace: str | None) -> str:
        """List everything (in ``namespace``), replace the cache's share of it, emit the
        differences; returns the version."""
        info = await self.connection.resource(self.api_version, self.kind)
        listing = await self.connection.request(
            "GET", info.path(namespace), params=self._params() | self._first_fill(namespace)
        )
        items = listing.get("items") if isinstance(listing, dict) else None
        if not isinstance(items, list | None):
            raise self._malformed("a list whose items are not a list")
        fresh = {}
        for item in items or []:
            obj = self._prepare(self._checked_object(item, "a list"))
            fresh[cache_key(obj)] = obj
        self._replace(fresh, namespace)
        return str((listing.get("metadata") or {}).get("resourceVersion", ""))

    async def _watch(self, version: str | None, namespace: str | None) -> str:
        """Follow changes (in ``namespace``) from ``version``, or (None) from the objects
        there are now, sent first as the stream's initial events and made the cache when
        the server says they ended, as a list would. Returns the last version seen when the
        stream ends ("" if it ended before the initial events did). Raises ApiError (410
        included) on failure."""
        info = await self.connection.resource(self.api_version, self.kind)
        lifetime_s = random.randint(*WATCH_TIMEOUT_S)
        params = {
            **self._params(),
            "watch": "1",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": lifetime_s,
        }
        # Until the server says the initial events ended: the objects it has.
        initial: dict[str, Object] | None = None
        if version is None:
            # At least as recent as the request, like a list (or as any state at hand).
            params |= {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}
            params |= self._first_fill(namespace)
            initial = {}
        else:
            params["resourceVersion"] = version
        last = version or ""
        # Closed as soon as this returns or raises (an ERROR event): on an HTTP/2
        # connection a stream left to the garbage collector keeps a stream slot and
        # keeps receiving.
        stream = self.connection.stream(
            info.path(namespace), params, read_timeout_s=QUIET_S, lifetime_s=lifetime_s + OVERDUE_S
        )
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                kind, obj = self._checked_event(event)
                if kind == "ERROR":
                    code = obj.get("code")
                    raise ApiError(
                        self.connection.name,
                        f"watch {self.kind}: {obj.get('message')}",
                        status=code if isinstance(code, int) else None,
                    )
                last = _rv(obj) or last
                if kind == "BOOKMARK":
                    if initial is not None and _ends_initial_events(obj):
                        self._replace(initial, namespace)
                        initial = None
                    continue
                obj = self._prepare(obj)
                key = cache_key(obj)
                if initial is not None:
                    if kind == "DELETED":
                        initial.pop(key, None)
                    else:
                        initial[key] = obj
                    continue
                if kind == "DELETED":
                    self.handler(kind, self._pop(key), None)
                else:
                    self.handler(kind, self._put(key, obj), obj)
        return last if initial is None else ""

    def _checked_event(self, event: object) -> tuple[str, Object]:
        """A watch event's type and object, as a member's API server sends them; a
        retryable ApiError for anything else (a broken or hostile member)."""
        if not isinstance(event, dict):
            raise self._malformed("a watch event that is not an object")
        kind, obj = event.get("type"), event.get("object")
        if kind not in _EVENT_TYPES or not isinstance(obj, dict):
            raise self._malformed(f"a watch event of type {str(kind)[:32]!r} or without an object")
        if kind in ("ERROR", "BOOKMARK"):
            return kind, obj
        return kind, self._checked_object(obj, "a watch event")

    def _checked_object(self, obj: object, where: str) -> Object:
        """``obj`` if it is an object with a name (what the cache keys it by)."""
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise self._malformed(f"{where} with an object that has no metadata.name")
        namespace = meta.get("namespace")
        if namespace is not None and not isinstance(namespace, str):
            raise self._malformed(f"{where} with an object whose metadata.namespace is no string")
        return obj  # type: ignore[return-value]

    def _malformed(self, what: str) -> ApiError:
        return ApiError(
            self.connection.name, f"{self.kind}: the member sent {what}", retryable=True
        )

    async def _back_off(self, delay_s: float, unreachable: bool) -> None:
        """Wait ``delay_s`` before trying again; after the server was unreachable, only
        until it answers anything again (a probe, another cache), so a member back from
        an outage has its caches back within a second rather than after a long backoff."""
        if not unreachable:
            await anyio.sleep(delay_s)
            return
        failed_at = time.monotonic()
        deadline = failed_at + delay_s
        while (left := deadline - time.monotonic()) > 0:
            await anyio.sleep(min(BACK_CHECK_S, left))
            answered = self.connection.answered_at
            if answered is not None and answered > failed_at:
                return

    async def run(self) -> None:
        """List and watch until :meth:`stop` or cancellation; errors are logged and
        retried with backoff."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._stopped:
                return
            if not self.namespaces:
                await self._follow(self.namespace)
            elif await self._cluster_scoped():
                self.mark_synced()  # nothing of it is in the namespaces
                await anyio.sleep_forever()
            else:
                async with anyio.create_task_group() as tg:
                    for namespace in self.namespaces:
                        tg.start_soon(self._follow, namespace)

    async def _cluster_scoped(self) -> bool:
        """Whether the kind is cluster-scoped, asked until the member answers (guessed
        namespaced, such a kind would be watched whole, once per namespace); False for a
        kind it does not serve (the watches then say so)."""
        backoff = 0.5
        while True:
            try:
                info = await self.connection.resource(self.api_version, self.kind)
            except UnknownKind:
                return False
            except Exception as exc:  # (any: one member's answer never ends the informer)
                backoff = await self._after_error(exc, backoff)
                continue
            self.last_error = None
            return not info.namespaced

    async def _follow(self, namespace: str | None) -> None:
        """List and watch (in ``namespace``) until cancelled, retrying with backoff."""
        version = ""
        backoff = 0.5
        while True:
            streamed = False
            try:
                streamed = not version and await self.connection.streams_initial_events()
                if streamed:
                    watched_from = time.monotonic()
                    version = await self._watch(None, namespace)
                else:
                    if not version:
                        version = await self._relist(namespace)
                    watched_from = time.monotonic()
                    version = await self._watch(version, namespace)
                self.last_error = None
                if time.monotonic() - watched_from >= SHORT_WATCH_S:
                    backoff = 0.5
                else:  # ended at once: as after an error, but from the version it reached
                    backoff = await self._after_error(None, backoff)
            except (ApiError, UnknownKind, ValueError) as exc:
                gone = isinstance(exc, ApiError) and exc.status == 410
                version = ""  # relist: after 410 the version is too old, after errors unknown
                if streamed and isinstance(exc, ApiError) and exc.status in (400, 422):
                    self.connection.refuse_watch_list()
                    continue
                if gone:
                    continue
                backoff = await self._after_error(exc, backoff)
            except Exception as exc:  # a bug of ours, or an answer nobody foresaw
                log.exception("informer %s/%s failed", self.connection.name, self.kind)
                version = ""
                backoff = await self._after_error(exc, backoff)

    async def _after_error(self, exc: Exception | None, backoff: float) -> float:
        """Record ``exc`` (waking whoever waits for the cache; None: a watch the server
        ended too soon, which is no error to show), then wait about ``backoff``; returns
        the next backoff."""
        if exc is not None:
            self.last_error = (
                str(exc) if isinstance(exc, ApiError | UnknownKind) else unforeseen(exc)
            )
            self.not_served = isinstance(exc, UnknownKind)
            self._settle()
            log.debug("informer %s/%s: %s", self.connection.name, self.kind, exc)
        unreachable = isinstance(exc, ApiError) and exc.retryable and exc.status is None
        await self._back_off(backoff * (0.5 + random.random()), unreachable)
        return min(backoff * 2, _MAX_BACKOFF_S)


_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def _ends_initial_events(bookmark: Object) -> bool:
    annotations = (bookmark.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(INITIAL_EVENTS_END) == "true")


def _rv(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _namespace(obj: Object) -> str | None:
    return (obj.get("metadata") or {}).get("namespace")


async def wait_synced(informers: Iterable[Informer]) -> None:
    """Return once every informer has listed."""
    for informer in informers:
        await informer.wait_synced()
