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

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kube.connection import KubeConnection, apply_creating_namespace
from kube.discovery import UnknownKind
from kube.errors import ApiError
from kube.informer import Informer, cache_key
from kube.keys import KindKey, ObjectKey
from kube.transport import Call
from propagator.conditions import some_of
from propagator.propagation.drift import fingerprint, in_line
from propagator.runtime.bounded import each
from propagator.runtime.memberregistry import NAMESPACES, Applied, Caches, Member
from propagator.tenancy.policy import describe
from propagator.work.objects import (
    MEMBER_LABEL,
    REVISION_ANNOTATION,
    Owner,
    key_of,
    member_label_value,
    owner_named,
    revision_of,
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


def _unwanted(
    member: Member,
    owner: Owner,
    kinds: Sequence[KindKey],
    cache: dict[KindKey, Informer],
    wanted: set[ObjectKey],
) -> set[ObjectKey]:
    """The application's objects on ``member`` it no longer wants: in the caches, or
    written by an earlier sync and not seen there yet (its watch event still on the way,
    or the watch being re-established after an outage)."""
    unwanted = set()
    for api_version, kind in kinds:
        for live in cache[api_version, kind].indexed(owner.label):
            if owner.owns(live) and key_of(live) not in wanted:
                unwanted.add(key_of(live))
    for key, record in member.applied.of(f"{owner.namespace}/{owner.name}"):
        if (
            key not in wanted
            and key[:2] in kinds
            and owner.owns(record.desired)
            and cache[key[0], key[1]].get(cache_key(record.desired)) is None
        ):
            unwanted.add(key)
    return unwanted


async def _delete_all(member: Member, keys: set[ObjectKey]) -> int:
    """Delete ``keys`` on ``member``; returns how many were there."""
    deleted = 0

    async def delete(key: ObjectKey) -> None:
        nonlocal deleted
        api_version, kind, namespace, name = key
        gone = await member.connection.delete(api_version, kind, name, namespace or None)
        member.applied.forget(key)
        deleted += gone

    await _each(sorted(keys), delete)
    return deleted


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
) -> SyncReport:
    """Bring ``member`` in line with ``work``; raises ApiError (or UnknownKind). Objects
    the application does not own are left as they are and named in the report's
    conflicts."""
    ahead: dict[int, Call] = {}
    try:
        return await _sync(member, work, caches, timeout_s, guard, ahead)
    finally:
        for call in ahead.values():  # its turn never came: the sync failed first
            call.drop()


async def _sync(
    member: Member,
    work: ClusterWork,
    caches: Caches,
    timeout_s: float,
    guard: Guard | None,
    ahead: dict[int, Call],
) -> SyncReport:
    """:func:`sync_cluster`; ``ahead``: the applies sent before their turn, by id() of
    the object (see ``write_all``)."""
    conn, owner = member.connection, work.owner
    objects = await in_default_namespace(conn, work.objects, work.namespace)
    refuse_outside_allowed(member, objects)
    desired = [owner.stamp(o, revision_of([o]), member.name) for o in objects]
    kinds = work.kinds
    wanted = {key_of(o) for o in desired}
    written: set[ObjectKey] = set()

    async def write_all(calls: Sequence[_Call], creates: Callable[..., Any] | None = None) -> None:
        """Run one round of ``calls``, the applies among the first ``IN_FLIGHT`` sent at
        once, in one write (``creates``: the function that applies as a create): each of
        :func:`_each`'s workers after the first would send its own after a round of the
        event loop's other work, and on a busy machine after the woken server took the
        processor. When every call of the round went out so, their answers are read here
        in turn (they arrive meanwhile), without a task each to wake and wait for."""
        with conn.together():
            for fn, obj in calls[:IN_FLIGHT]:
                if fn is apply or fn is creates:
                    ahead[id(obj)] = conn.send_apply(obj, new=fn is creates)
        if len(calls) <= IN_FLIGHT and all(
            id(obj) in ahead and ahead[id(obj)].sent for _, obj in calls
        ):
            for call in calls:
                await _call(call)
        else:
            await _each(calls, _call)

    async def apply(obj: dict[str, Any], new: bool = False) -> None:
        sent = ahead.pop(id(obj), None)
        answer = await apply_creating_namespace(conn, obj, new=new, sent=sent)
        meta = answer.get("metadata") or {}
        generation, version = meta.get("generation"), meta.get("resourceVersion")
        member.applied.record(
            work.app,
            key_of(obj),
            Applied(
                obj,
                fingerprint(answer, obj),
                generation if isinstance(generation, int) else None,
                version if isinstance(version, str) else None,
            ),
        )
        written.add(key_of(obj))

    fresh = _fresh(member, desired, kinds)
    if fresh is not None:
        made: list[str] = []

        async def make(name: str) -> None:
            if await _create_namespace(member, name, work, fresh[name]):
                made.append(name)

        await _each(sorted(fresh), make)
        if len(made) == len(fresh):  # nothing can be in them: no cache to look at first
            if guard is not None:
                await guard(member, work)
            await write_all([(apply, o) for o in desired])
            cache = await caches(member, kinds, timeout_s)
            deleted = await _delete_all(member, _unwanted(member, owner, kinds, cache, wanted))
            return SyncReport(len(written), deleted, 0)

    cache = await caches(member, kinds, timeout_s)
    ours = cache.get(NAMESPACES)  # when the application brings namespaces

    def known(namespace: str) -> bool:
        return namespace in member.namespaces or (
            ours is not None and ours.get(namespace) is not None
        )

    firsts: list[dict[str, Any]] = []
    """Namespaces and CRDs to write, before everything else."""
    rest: list[dict[str, Any]] = []
    unknown: list[dict[str, Any]] = []
    """Objects the caches lack that may exist all the same: written as creates, and read
    before they are written if they exist."""
    waiting: dict[str, list[dict[str, Any]]] = {}
    """Objects the caches lack in a namespace not known to exist (by namespace, the
    namespace itself among them when the application brings it): the namespace is
    created, and they are written at once if that made it, as creates if it existed."""
    conflicts: list[str] = []
    drifted: set[ObjectKey] = set()
    """Objects that were in line after an earlier apply of this revision."""
    for obj in desired:
        key = key_of(obj)
        live = cache[key[0], key[1]].get(cache_key(obj))
        if live is not None:
            if key[:2] == NAMESPACES and not owner.annotated(live):
                continue  # a namespace is shared: one that exists is left as it is
            if problem := _claimed(obj, live, work, member.name):
                conflicts.append(problem)
                continue
        before = member.applied.get(key)
        recorded = before if before and _revision(before.desired) == _revision(obj) else None
        last = (recorded.fingerprint, recorded.resource_version) if recorded else (None, None)
        if in_line(live, obj, *last):
            continue
        if recorded is not None:
            drifted.add(key)
        # The caches hold only what carries our labels: an object they lack may exist
        # unstamped, or through another MemberCluster, unless its namespace is new.
        namespace = _namespace_of(key)
        if live is not None:
            (firsts if key[:2] in FIRST_KINDS else rest).append(obj)
        elif namespace and not known(namespace):
            waiting.setdefault(namespace, []).append(obj)
        else:
            unknown.append(obj)

    created: list[str] = []

    async def create(name: str) -> None:
        """Create a namespace not known to exist: the answer says whether it did."""
        brought = any(key_of(o)[:2] == NAMESPACES for o in waiting[name])
        if await _create_namespace(member, name, work, brought):
            created.append(name)

    async def may_write(obj: dict[str, Any]) -> bool:
        """Read an object that exists though the caches cannot see it: one unstamped,
        stamped by another application or propagated through another MemberCluster is
        not this sync's to write (a conflict, or a shared namespace left as it is)."""
        meta = obj["metadata"]
        try:
            live = await conn.get(
                obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")
            )
        except ApiError as exc:
            if not exc.not_found:
                raise
            return True  # gone meanwhile
        if key_of(obj)[:2] == NAMESPACES and not owner.annotated(live):
            return False
        problem = _claimed(obj, live, work, member.name)
        if problem is not None:
            conflicts.append(problem)
        return problem is None

    async def look(obj: dict[str, Any]) -> None:
        """Write an object that exists though the caches cannot see it, if it may be."""
        if await may_write(obj):
            await apply(obj)

    async def write_unseen(obj: dict[str, Any]) -> None:
        """Write an object the caches cannot see as a create (one request, as most are
        new); one that exists refuses it, untouched, and is read before it is written."""
        try:
            await apply(obj, new=True)
        except ApiError as exc:
            if not exc.not_new:
                raise
            await look(obj)

    # Namespaces and CRDs first: what may be in them or of their kind waits for them. A
    # Namespace the caches cannot see, known to exist, is someone else's or shared.
    calls: list[_Call] = [(create, n) for n in sorted(waiting)]
    calls += [(apply, o) for o in firsts]
    unseen: list[dict[str, Any]] = []
    for obj in unknown:
        if key_of(obj)[:2] == NAMESPACES:
            calls.append((look, obj))
        elif (obj["apiVersion"], obj["kind"]) in FIRST_KINDS:
            calls.append((write_unseen, obj))
        else:
            unseen.append(obj)
    await write_all(calls, write_unseen)
    calls = []
    for name in sorted(waiting):  # nothing can be in a namespace this sync made
        if name in created:
            rest.extend(waiting[name])
            continue
        for obj in waiting[name]:  # it existed: so does its Namespace
            if key_of(obj)[:2] == NAMESPACES:
                calls.append((look, obj))
            else:
                unseen.append(obj)
    if (rest or unseen) and guard is not None:
        await guard(member, work)
    calls += [(apply, o) for o in rest] + [(write_unseen, o) for o in unseen]
    await write_all(calls, write_unseen)

    deleted = await _delete_all(member, _unwanted(member, owner, kinds, cache, wanted))
    return SyncReport(len(written), deleted, len(written & drifted), tuple(sorted(conflicts)))


def _claimed(
    obj: dict[str, Any], live: dict[str, Any], work: ClusterWork, cluster: str
) -> str | None:
    """Why ``obj`` must not be written over ``live`` (None: it may). The application's
    own object is written whatever labels someone took off it, unless another
    MemberCluster's label says it was propagated through that one: then two MemberClusters
    reach this API server, and writing would take it from the other, again and again."""
    if not work.owner.annotated(live):
        return _conflict(obj, live, work)
    through = ((live.get("metadata") or {}).get("labels") or {}).get(MEMBER_LABEL)
    if through is not None and through != member_label_value(cluster):
        return (
            f"{describe(obj)} is propagated there through MemberCluster {through} as well "
            "(two MemberClusters reach the same API server)"
        )
    return None


def _conflict(obj: dict[str, Any], live: dict[str, Any], work: ClusterWork) -> str | None:
    """Why ``obj`` must not be written over ``live`` (None: it may). A Namespace that
    exists is shared, never a conflict: it is left as it is."""
    owner = owner_named(live)
    what = describe(obj)
    if owner is not None:
        return f"{what} belongs to {owner}"
    if work.adopt:
        return None
    return (
        f"{what} exists on the member without Propagator's stamp "
        "(spec.conflictResolution: Adopt takes it over)"
    )
