"""What a change in a member's watch cache, or in the fleet snapshot, means for the
controller (pure)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleet.snapshot import FleetSnapshot, capacity_only
from kube.keys import cache_key
from propagator.propagation.drift import in_line
from propagator.work.objects import APP_ANNOTATION, REVISION_ANNOTATION, key_of
from propagator.work.table import ClusterWork, WorkTable

if TYPE_CHECKING:  # the type only: routing decides, it does no I/O
    from propagator.runtime.memberregistry import Member


@dataclass(frozen=True)
class Route:
    sync: str | None = None
    """Application to sync again on the member: its object drifted or was deleted."""
    refresh: str | None = None
    """Application whose status to refresh: a workload of its changed (health)."""


def route_member_event(
    member: Member,
    table: WorkTable,
    old: dict[str, Any] | None,
    new: dict[str, Any] | None,
    interprets: Callable[[str, str], bool],
) -> Route:
    """Route one cache event (``new`` None: deleted) of an object carrying our label.
    ``interprets(apiVersion, kind)``: whether the kind's status matters (it has health or
    status rules).

    Only objects of an application that has work on this member count. A deleted object is
    synced again if the work still puts it there (not one a sync pruned or removed); a
    changed one when, at the revision last applied, the fields applied no longer have the
    values the member gave back then (status updates and fields of other managers do not
    count).
    """
    obj = new or old or {}
    app = ((obj.get("metadata") or {}).get("annotations") or {}).get(APP_ANNOTATION)
    work = table.get(str(app), member.name) if app else None
    if work is None:
        return Route()
    app = str(app)
    applied = member.applied.get(key_of(obj))
    drifted = (new is None and _wanted(work, obj)) or (
        new is not None
        and applied is not None
        # Another revision: our own apply of it, whose answer is not recorded yet.
        and _revision(new) == _revision(applied.desired)
        and not in_line(new, applied.desired, applied.fingerprint, applied.resource_version)
    )
    workload = interprets(str(obj.get("apiVersion")), str(obj.get("kind")))
    return Route(sync=app if drifted else None, refresh=app if workload else None)


@dataclass(frozen=True)
class FleetChange:
    replan: frozenset[str]
    """Fleets whose membership changed, or a member's readiness, taints, labels, layer or
    kinds served: every application of theirs is planned again."""
    capacity: frozenset[str]
    """The other fleets where a member's capacity changed: only the applications whose
    placement capacity can move are planned again (:attr:`Plan.capacity_bound`)."""


def fleet_change(before: FleetSnapshot, after: FleetSnapshot) -> FleetChange:
    """The fleets whose clusters changed from ``before`` to ``after``, and how."""
    changed = {
        n
        for n in set(before.clusters) | set(after.clusters)
        if before.clusters.get(n) != after.clusters.get(n)
    }
    moved = {n for n in changed if not capacity_only(before.clusters.get(n), after.clusters.get(n))}
    replan, capacity = set(), set()
    for fleet in set(before.fleets) | set(after.fleets):
        members = after.fleets.get(fleet, frozenset())
        if before.fleets.get(fleet) != after.fleets.get(fleet) or moved & members:
            replan.add(fleet)
        elif changed & members:
            capacity.add(fleet)
    return FleetChange(frozenset(replan), frozenset(capacity))


def to_plan_again(
    change: FleetChange,
    apps: Iterable[dict[str, Any]],
    capacity_bound: Callable[[str], bool],
) -> list[str]:
    """The keys of ``apps`` that ``change`` plans again: every application of a fleet in
    ``change.replan``; of a fleet whose clusters' capacity alone changed, those
    ``capacity_bound`` (by key) says capacity can move."""
    keys = []
    for app in apps:
        fleet = (app.get("spec") or {}).get("fleet")
        if fleet not in change.replan and fleet not in change.capacity:
            continue
        key = cache_key(app)
        if fleet in change.replan or capacity_bound(key):
            keys.append(key)
    return keys


def _wanted(work: ClusterWork, obj: dict[str, Any]) -> bool:
    """Whether ``work`` puts ``obj`` on its member (an object of the work without a
    namespace goes into the application's, or is cluster-scoped)."""
    meta = obj.get("metadata") or {}
    for desired in work.objects:
        wanted = desired.get("metadata") or {}
        if (
            wanted.get("name") == meta.get("name")
            and desired.get("kind") == obj.get("kind")
            and desired.get("apiVersion") == obj.get("apiVersion")
            and wanted.get("namespace") in (None, meta.get("namespace"))
        ):
            return True
    return False


def _revision(obj: dict[str, Any]) -> Any:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(REVISION_ANNOTATION)
