"""Syncing one application on one member: apply what differs, delete what is no longer
wanted, both judged from the member's watch caches (no read per object).

An object is applied when the cache lacks it or its projection onto the applied fields
differs from what the last apply left (drift: ``propagation.drift``). Namespaces and CRDs
go first, then everything else, a bounded number at once. The caches hold only what
carries our labels, so an object they lack is read before it is written, unless its
namespace is new: a namespace the member is not known to have is created, and the answer
says whether it is; a first apply into it then costs one request per object. Objects
carrying this application's stamp that it no longer wants are deleted.

A sync whose caches have not listed yet (the first of a kind on that member: they start
when the sync is queued), with every object going into a namespace not known to exist
there, starts with those namespaces: if creating them made them all, nothing there can
differ from what the sync writes, so the objects are written without waiting for the
caches, which then serve the prune only. A namespace that existed sends the sync the
usual way, once the caches have listed.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube.connection import FIELD_MANAGER, KubeConnection, apply_creating_namespace
from kube.discovery import UnknownKind
from kube.errors import ApiError
from kube.informer import Informer
from kube.keys import KindKey, ObjectKey, cache_key
from kube.transport import Call
from propagator.conditions import some_of
from propagator.propagation.drift import fingerprint, in_line, matches
from propagator.propagation.ownership import claimed, to_orphan, unstamped, unwanted
from propagator.runtime.bounded import each
from propagator.runtime.memberregistry import NAMESPACES, Applied, Caches, Member
from propagator.tenancy.policy import describe
from propagator.work.objects import REVISION_ANNOTATION, Owner, key_of, revision_of
from propagator.work.release import (
    RELEASED_MANAGER,
    GroupKindName,
    handover,
    identity,
    owned_by,
    read,
    scale_target,
    without,
    without_owned,
)
from propagator.work.table import ClusterWork

FIRST_KINDS = frozenset(
    {("v1", "Namespace"), ("apiextensions.k8s.io/v1", "CustomResourceDefinition")}
)
"""Applied before everything else: other objects may live in or be of them."""
IN_FLIGHT = 16
"""Requests at once to one member within one sync: an application of up to 16 objects
goes out in one round trip to a far member (on one HTTP/2 connection), while a member's
API server (400 requests in flight by default) is not flooded by one application."""

Guard = Callable[[Member, ClusterWork], Awaitable[None]]
"""Called before a sync writes anything but namespaces and CRDs (the tenant's quotas)."""


@dataclass(frozen=True)
class SyncReport:
    """What one sync wrote."""

    applied: int
    """Objects written (server-side apply)."""
    deleted: int
    healed: int
    """Of those written, objects that had been in line and drifted or were deleted."""
    conflicts: tuple[str, ...] = ()
    """Objects left alone: another application's, or unstamped (unless adopting)."""
    drift: tuple[str, ...] = ()
    """Objects that drifted and were left so (not healing), as kind namespace/name."""
    orphaned: tuple[str, ...] = ()
    """Objects no longer wanted that were left on the member (kept on delete)."""


async def in_default_namespace(
    conn: KubeConnection, objects: Sequence[dict[str, Any]], namespace: str
) -> list[dict[str, Any]]:
    """The objects as the member keeps them: ``namespace`` set on the namespaced ones that
    have none, and none on the cluster-scoped ones (its API server drops it; an object
    keyed by it would be missed in the caches, written again, and pruned)."""
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        info = await conn.resource(obj["apiVersion"], obj["kind"])
        if not info.namespaced and "namespace" in meta:
            out.append({**obj, "metadata": {k: v for k, v in meta.items() if k != "namespace"}})
        elif info.namespaced and not meta.get("namespace"):
            out.append({**obj, "metadata": {**meta, "namespace": namespace}})
        else:
            out.append(obj)
    return out


def refuse_outside_allowed(member: Member, objects: Sequence[dict[str, Any]]) -> None:
    """Raise a non-retryable ApiError naming the objects a member limited to some
    namespaces (MemberCluster spec.namespaces) may not hold: cluster-scoped ones and those
    in other namespaces. ``objects`` as :func:`in_default_namespace` gives them: a
    namespace on every namespaced object, none on the others (by the member's discovery,
    whatever their metadata said)."""
    allowed = member.allowed_namespaces
    if not allowed:
        return
    outside = []
    for obj in objects:
        namespace = (obj.get("metadata") or {}).get("namespace")
        if not namespace:
            outside.append(f"{describe(obj)} is cluster-scoped")
        elif namespace not in allowed:
            outside.append(f"{describe(obj)}: metadata.namespace {namespace!r} is not allowed")
    if outside:
        raise ApiError(
            member.name,
            f"{len(outside)} object(s) outside the namespaces MemberCluster {member.name} "
            f"allows (spec.namespaces: {', '.join(allowed)}): {some_of(outside, '; ', 5)}",
        )


def _revision(obj: dict[str, Any]) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(REVISION_ANNOTATION)
    return None if value is None else str(value)


def namespace_to_create(
    name: str, work: ClusterWork, cluster: str, brought: bool
) -> dict[str, Any]:
    """What creating namespace ``name`` writes: the application's stamp without its
    revision. One the application brings keeps the stamp's annotations (the apply that
    follows writes the rest: a label later taken out of the manifest is not kept by the
    create); one its objects need gets only the labels (who made it, and a Namespace cache
    lists it): it is not the application's, and stays when the application goes."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    stamped = work.owner.stamp(namespace, "", cluster)
    meta = stamped["metadata"]
    if brought:
        del meta["annotations"][REVISION_ANNOTATION]
    else:
        del meta["annotations"]
    return stamped


async def _create_namespace(member: Member, name: str, work: ClusterWork, brought: bool) -> bool:
    """Create namespace ``name`` on ``member`` (:func:`namespace_to_create`): True if
    this made it, False if it existed. It is known to exist there from then on."""
    try:
        await member.connection.create(namespace_to_create(name, work, member.name, brought))
    except ApiError as exc:
        if not exc.already_exists:
            raise
        made = False
    else:
        made = True
    member.namespaces.add(name)
    return made


def _namespace_of(key: ObjectKey) -> str:
    """The namespace an object is in, or that it is ("" for other cluster-scoped ones)."""
    return key[3] if key[:2] == NAMESPACES else key[2]


def _fresh(
    member: Member, desired: Sequence[dict[str, Any]], kinds: Sequence[KindKey]
) -> dict[str, bool] | None:
    """The namespaces to create first when this sync may write before its caches list
    (by name: whether the application brings it), else None: some cache of ``kinds`` has
    not listed, and every object is in (or is) a namespace not known to exist there."""
    listed = all(
        (cache := member.cached(*kind)) is not None and (cache.synced or cache.not_served)
        for kind in kinds
    )
    if listed or not desired:
        return None
    namespaces: dict[str, bool] = {}
    for obj in desired:
        key = key_of(obj)
        namespace = _namespace_of(key)
        if not namespace or namespace in member.namespaces:
            return None
        namespaces[namespace] = namespaces.get(namespace, False) or key[:2] == NAMESPACES
    return namespaces


async def _delete_all(
    member: Member, owner: Owner, unwanted: dict[ObjectKey, dict[str, Any]]
) -> tuple[int, list[str]]:
    """Delete ``unwanted`` on ``member``, but for those kept on delete (and the
    Namespaces that hold them), which lose the application's stamp instead; returns how
    many were deleted, and the kept ones."""
    deleted = 0
    orphans = to_orphan(unwanted)
    orphaned: list[str] = []

    async def delete(key: ObjectKey) -> None:
        nonlocal deleted
        api_version, kind, namespace, name = key
        if key in orphans:
            try:
                await member.connection.merge_patch(
                    api_version, kind, name, unstamped(owner), namespace=namespace or None
                )
            except ApiError as exc:
                if not exc.not_found:
                    raise
            else:
                orphaned.append(describe(unwanted[key]))
            member.applied.forget(key)
            return
        gone = await member.connection.delete(api_version, kind, name, namespace or None)
        member.applied.forget(key)
        deleted += gone

    await _each(sorted(unwanted), delete)
    return deleted, sorted(orphaned)


_Call = tuple[Callable[[Any], Awaitable[None]], Any]
"""A function and what to call it with."""


async def _call(call: _Call) -> None:
    await call[0](call[1])


async def _each(items: Sequence[Any], fn: Callable[[Any], Awaitable[None]]) -> None:
    """``fn`` on every item, ``IN_FLIGHT`` at once; the first failure is raised."""
    await each(items, fn, IN_FLIGHT, (ApiError, UnknownKind))


async def sync_cluster(
    member: Member,
    work: ClusterWork,
    caches: Caches,
    timeout_s: float,
    guard: Guard | None = None,
    heal: bool = True,
) -> SyncReport:
    """Bring ``member`` in line with ``work``; raises ApiError (or UnknownKind). Objects
    the application does not own are left as they are and named in the report's
    conflicts; without ``heal``, objects that drifted are left as they are and named in
    its drift."""
    ahead: dict[int, Call] = {}
    try:
        return await _Sync(member, work, caches, timeout_s, guard, ahead, heal).run()
    finally:
        for call in ahead.values():  # its turn never came: the sync failed first
            call.drop()


@dataclass
class _Sorted:
    """A sync's objects by how they are written."""

    firsts: list[dict[str, Any]] = field(default_factory=list)
    """Namespaces and CRDs the caches show, to write before everything else."""
    rest: list[dict[str, Any]] = field(default_factory=list)
    """Other objects the caches show, out of line."""
    unknown: list[dict[str, Any]] = field(default_factory=list)
    """Objects the caches lack that may exist all the same: written as creates, and read
    before they are written if they exist."""
    waiting: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Objects the caches lack in a namespace not known to exist (by namespace, the
    namespace itself among them when the application brings it): the namespace is
    created, and they are written at once if that made it, as creates if it existed."""
    drifted: set[ObjectKey] = field(default_factory=set)
    """Objects that were in line after an earlier apply of this revision."""
    releasing: list[dict[str, Any]] = field(default_factory=list)
    """Objects the caches show with fields left to the member that may differ: written
    (if at all) once their ownership there is read."""


class _Sync:
    """One sync of ``work`` on ``member``: its steps and what they share. ``ahead``: the
    applies sent before their turn, by id() of the object (see :meth:`_write_all`)."""

    def __init__(
        self,
        member: Member,
        work: ClusterWork,
        caches: Caches,
        timeout_s: float,
        guard: Guard | None,
        ahead: dict[int, Call],
        heal: bool = True,
    ) -> None:
        self.member, self.work, self.caches = member, work, caches
        self.heal, self.release = heal, work.release
        self.drift: list[str] = []
        self.orphaned: list[str] = []
        """Objects the prune left on the member without the application's stamp."""
        self.drifted: set[ObjectKey] = set()
        self.autoscalers: dict[str, frozenset[GroupKindName]] = {}
        """By namespace: what the member's own autoscalers there scale (read once)."""
        self.timeout_s, self.guard, self.ahead = timeout_s, guard, ahead
        self.conn, self.owner, self.kinds = member.connection, work.owner, work.kinds
        self.desired: list[dict[str, Any]] = []
        self.wanted: set[ObjectKey] = set()
        self.written: set[ObjectKey] = set()
        self.conflicts: list[str] = []
        self.created: list[str] = []
        """Namespaces this sync created (nothing can be in them)."""
        self.waiting: dict[str, list[dict[str, Any]]] = {}

    async def run(self) -> SyncReport:
        """:func:`sync_cluster`."""
        member, owner = self.member, self.owner
        objects = await in_default_namespace(self.conn, self.work.objects, self.work.namespace)
        refuse_outside_allowed(member, objects)
        self.release = self.work.release.on(objects)
        self.desired = [owner.stamp(o, revision_of([o]), member.name) for o in objects]
        self.wanted = {key_of(o) for o in self.desired}
        if self.work.suspended:
            return self._report_only(await self.caches(member, self.kinds, self.timeout_s))
        fresh = _fresh(member, self.desired, self.kinds)
        if fresh is not None and await self._made_fresh(fresh):
            # Nothing can be in them: no cache to look at first.
            await self._guarded()
            await self._write_all([(self._apply, o) for o in self.desired])
            cache = await self.caches(member, self.kinds, self.timeout_s)
            deleted = await self._prune(cache)
            return SyncReport(len(self.written), deleted, 0, orphaned=tuple(self.orphaned))
        cache = await self.caches(member, self.kinds, self.timeout_s)
        plan = self._sort(cache)
        self.waiting, self.drifted = plan.waiting, plan.drifted
        await self._write_firsts(plan)
        await self._write_rest(plan)
        deleted = await self._prune(cache)
        written = self.written
        return SyncReport(
            len(written),
            deleted,
            len(written & plan.drifted),
            tuple(sorted(self.conflicts)),
            tuple(sorted(self.drift)),
            tuple(self.orphaned),
        )

    def _report_only(self, cache: dict[KindKey, Informer]) -> SyncReport:
        """A suspended sync: nothing is written or deleted; every object not in line
        (drifted, or not there) is reported as drift."""
        self.heal = False
        plan = self._sort(cache)
        waiting = [o for objects in plan.waiting.values() for o in objects]
        for obj in (*plan.firsts, *plan.rest, *plan.unknown, *plan.releasing, *waiting):
            self.drift.append(describe(obj))
        return SyncReport(0, 0, 0, tuple(sorted(self.conflicts)), tuple(sorted(self.drift)))

    async def _made_fresh(self, fresh: dict[str, bool]) -> bool:
        """Create the namespaces ``fresh`` names (whether the application brings each);
        whether every one of them was made by this sync."""
        made: list[str] = []

        async def make(name: str) -> None:
            if await _create_namespace(self.member, name, self.work, fresh[name]):
                made.append(name)

        await _each(sorted(fresh), make)
        return len(made) == len(fresh)

    def _sort(self, cache: dict[KindKey, Informer]) -> _Sorted:
        """Each desired object by how it is written (in line ones not at all; a Namespace
        someone else has, and a claimed object, left as they are)."""
        member, owner, work = self.member, self.owner, self.work
        ours = cache.get(NAMESPACES)  # when the application brings namespaces

        def known(namespace: str) -> bool:
            return namespace in member.namespaces or (
                ours is not None and ours.get(namespace) is not None
            )

        out = _Sorted()
        for obj in self.desired:
            key = key_of(obj)
            live = cache[key[0], key[1]].get(cache_key(obj))
            if live is not None:
                if key[:2] == NAMESPACES and not owner.annotated(live):
                    continue  # a namespace is shared: one that exists is left as it is
                if problem := claimed(obj, live, work, member.name):
                    self.conflicts.append(problem)
                    continue
            before = member.applied.get(key)
            recorded = before if before and _revision(before.desired) == _revision(obj) else None
            pointers = self.release.pointers(obj) if live is not None else []
            # What was applied (fields left to the member since then left out too).
            shape = without(recorded.desired if recorded else obj, pointers)
            last = (recorded.fingerprint, recorded.resource_version) if recorded else (None, None)
            if recorded is not None and pointers and shape != recorded.desired:
                last = (None, None)  # recorded over more fields than are now Propagator's
            if in_line(live, shape, *last):
                continue
            drifted = recorded is not None or (
                live is not None and _revision(live) == _revision(obj)
            )
            if drifted:
                out.drifted.add(key)
            if live is not None and self._may_release(obj, live, pointers):
                out.releasing.append(obj)
                continue
            if drifted and not self.heal:
                self.drift.append(describe(obj))
                continue
            # The caches hold only what carries our labels: an object they lack may exist
            # unstamped, or through another MemberCluster, unless its namespace is new.
            namespace = _namespace_of(key)
            if live is not None:
                (out.firsts if key[:2] in FIRST_KINDS else out.rest).append(obj)
            elif namespace and not known(namespace):
                out.waiting.setdefault(namespace, []).append(obj)
            else:
                out.unknown.append(obj)
        return out

    async def _write_firsts(self, plan: _Sorted) -> None:
        """Namespaces and CRDs first: what may be in them or of their kind waits for them.
        A Namespace the caches cannot see, known to exist, is someone else's or shared.
        The other objects the caches lack are kept in ``plan.unknown`` for the rest."""
        calls: list[_Call] = [(self._create, n) for n in sorted(plan.waiting)]
        calls += [(self._apply, o) for o in plan.firsts]
        unseen: list[dict[str, Any]] = []
        for obj in plan.unknown:
            if key_of(obj)[:2] == NAMESPACES:
                calls.append((self._look, obj))
            elif (obj["apiVersion"], obj["kind"]) in FIRST_KINDS:
                calls.append((self._write_unseen, obj))
            else:
                unseen.append(obj)
        plan.unknown = unseen
        await self._write_all(calls, self._write_unseen)

    async def _write_rest(self, plan: _Sorted) -> None:
        """Everything else, once the tenant's quotas are in place (the guard)."""
        calls: list[_Call] = [(self._apply_released, o) for o in plan.releasing]
        rest, unseen = list(plan.rest), list(plan.unknown)
        for name in sorted(plan.waiting):  # nothing can be in a namespace this sync made
            if name in self.created:
                rest.extend(plan.waiting[name])
                continue
            for obj in plan.waiting[name]:  # it existed: so does its Namespace
                if key_of(obj)[:2] == NAMESPACES:
                    calls.append((self._look, obj))
                else:
                    unseen.append(obj)
        if rest or unseen or plan.releasing:
            await self._guarded()
        calls += [(self._apply, o) for o in rest] + [(self._write_unseen, o) for o in unseen]
        await self._write_all(calls, self._write_unseen)

    async def _guarded(self) -> None:
        if self.guard is not None:
            await self.guard(self.member, self.work)

    async def _prune(self, cache: dict[KindKey, Informer]) -> int:
        """Delete what the application no longer wants (but what it keeps on delete:
        :attr:`orphaned`); returns how many were there."""
        gone = unwanted(self.member, self.owner, self.kinds, cache, self.wanted)
        deleted, self.orphaned = await _delete_all(self.member, self.owner, gone)
        return deleted

    async def _write_all(
        self, calls: Sequence[_Call], creates: Callable[..., Any] | None = None
    ) -> None:
        """Run one round of ``calls``, the applies among the first ``IN_FLIGHT`` sent at
        once, in one write (``creates``: the function that applies as a create): each of
        :func:`_each`'s workers after the first would send its own after a round of the
        event loop's other work, and on a busy machine after the woken server took the
        processor. When every call of the round went out so, their answers are read here
        in turn (they arrive meanwhile), without a task each to wake and wait for."""
        ahead = self.ahead
        with self.conn.together():
            for fn, obj in calls[:IN_FLIGHT]:
                # (bound methods: equal, not identical, from one access to the next)
                if fn == self._apply or (creates is not None and fn == creates):
                    ahead[id(obj)] = self.conn.send_apply(obj, new=fn == creates)
        if len(calls) <= IN_FLIGHT and all(
            id(obj) in ahead and ahead[id(obj)].sent for _, obj in calls
        ):
            for call in calls:
                await _call(call)
        else:
            await _each(calls, _call)

    async def _apply(self, obj: dict[str, Any], new: bool = False) -> None:
        sent = self.ahead.pop(id(obj), None)
        answer = await apply_creating_namespace(self.conn, obj, new=new, sent=sent)
        # A field left to the member is Propagator's only until the object exists.
        self._record(without(obj, self.release.pointers(obj)), answer)
        self.written.add(key_of(obj))

    def _record(self, applied: dict[str, Any], answer: dict[str, Any]) -> None:
        """``applied`` is in line on the member, whose version ``answer`` is."""
        meta = answer.get("metadata") or {}
        generation, version = meta.get("generation"), meta.get("resourceVersion")
        self.member.applied.record(
            self.work.app,
            key_of(applied),
            Applied(
                applied,
                fingerprint(answer, applied),
                generation if isinstance(generation, int) else None,
                version if isinstance(version, str) else None,
            ),
        )

    def _may_release(self, obj: dict[str, Any], live: dict[str, Any], pointers: list[str]) -> bool:
        """Whether writing ``obj`` over ``live`` must first read who owns what there: it
        leaves fields to the member by rule, or its replicas differ from what it says
        (an autoscaler on the member may own them)."""
        if pointers or self.release.managers(obj):
            return True
        scale = self.release.scale_field(obj)
        return scale is not None and read(live, scale) != read(obj, scale)

    async def _autoscaled(self, namespace: str) -> frozenset[GroupKindName]:
        """What the member's autoscalers in ``namespace`` scale."""
        if namespace not in self.autoscalers:
            try:
                listing = await self.conn.list(
                    "autoscaling/v2", "HorizontalPodAutoscaler", namespace
                )
            except (ApiError, UnknownKind) as exc:
                if isinstance(exc, ApiError) and not exc.not_found:
                    raise
                listing = {}
            # (listed items carry no apiVersion or kind)
            items = listing.get("items") or []
            targets = (scale_target(item, namespace) for item in items)
            self.autoscalers[namespace] = frozenset(t for t in targets if t is not None)
        return self.autoscalers[namespace]

    async def _apply_released(self, obj: dict[str, Any]) -> None:
        """Write ``obj`` without what the member owns: the fields the application leaves
        it, those its named field managers own there, and the replicas of a workload one
        of its autoscalers scales. A field Propagator still owns is handed over first
        (:mod:`propagator.work.release`); nothing is written when the rest is in line."""
        meta = obj["metadata"]
        live = await self._read(obj)
        if live is None:
            await self._apply(obj)  # gone meanwhile: created whole
            return
        pointers = self.release.pointers(obj)
        scale = self.release.scale_field(obj)
        if (
            scale is not None
            and scale not in pointers
            and read(live, scale) != read(obj, scale)
            and identity(obj) in await self._autoscaled(str(meta.get("namespace") or ""))
        ):
            pointers.append(scale)
        stripped = without(obj, pointers)
        theirs = owned_by(live, self.release.managers(obj))
        if theirs and stripped is obj:
            stripped = copy.deepcopy(obj)  # (the desired object is not changed)
        for tree in theirs:
            without_owned(stripped, tree)
        keep = handover(live, owned_by(live, [FIELD_MANAGER]), pointers)
        key = key_of(obj)
        if keep is None and matches(live, stripped):
            self._record(stripped, live)
            return
        if key in self.drifted and not self.heal:
            self.drift.append(describe(obj))
            return
        if keep is not None:
            await self.conn.apply(keep, field_manager=RELEASED_MANAGER)
        answer = await self.conn.apply(stripped)
        self._record(stripped, answer)
        self.written.add(key)

    async def _create(self, name: str) -> None:
        """Create a namespace not known to exist: the answer says whether it did."""
        brought = any(key_of(o)[:2] == NAMESPACES for o in self.waiting[name])
        if await _create_namespace(self.member, name, self.work, brought):
            self.created.append(name)

    async def _read(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """``obj`` as the member holds it (None: it does not)."""
        meta = obj["metadata"]
        try:
            return await self.conn.get(
                obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")
            )
        except ApiError as exc:
            if not exc.not_found:
                raise
            return None

    async def _may_write(self, obj: dict[str, Any]) -> bool:
        """Read an object that exists though the caches cannot see it: one unstamped,
        stamped by another application or propagated through another MemberCluster is
        not this sync's to write (a conflict, or a shared namespace left as it is)."""
        live = await self._read(obj)
        if live is None:
            return True  # gone meanwhile
        if key_of(obj)[:2] == NAMESPACES and not self.owner.annotated(live):
            return False
        problem = claimed(obj, live, self.work, self.member.name)
        if problem is not None:
            self.conflicts.append(problem)
        return problem is None

    async def _look(self, obj: dict[str, Any]) -> None:
        """Write an object that exists though the caches cannot see it, if it may be."""
        if await self._may_write(obj):
            await self._apply(obj)

    async def _write_unseen(self, obj: dict[str, Any]) -> None:
        """Write an object the caches cannot see as a create (one request, as most are
        new); one that exists refuses it, untouched, and is read before it is written."""
        try:
            await self._apply(obj, new=True)
        except ApiError as exc:
            if not exc.not_new:
                raise
            await self._look(obj)
