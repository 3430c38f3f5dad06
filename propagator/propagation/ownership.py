"""Whose an object on a member is, for a sync: this application's to write, someone
else's (a conflict, named in the status), or this application's and no longer wanted (to
delete)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from api.application import KEEP_ANNOTATION, KEEP_VALUE
from kube.informer import Informer
from kube.keys import KindKey, ObjectKey, cache_key
from propagator.runtime.memberregistry import NAMESPACES, Member
from propagator.tenancy.policy import describe
from propagator.work.objects import (
    APP_ANNOTATION,
    APP_LABEL,
    MEMBER_LABEL,
    ORPHANED_ANNOTATION,
    OWNER_UID_ANNOTATION,
    REVISION_ANNOTATION,
    Owner,
    key_of,
    member_label_value,
    owner_named,
)
from propagator.work.table import ClusterWork


def claimed(
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


def unwanted(
    member: Member,
    owner: Owner,
    kinds: Sequence[KindKey],
    cache: dict[KindKey, Informer],
    wanted: set[ObjectKey],
) -> dict[ObjectKey, dict[str, Any]]:
    """The application's objects on ``member`` it no longer wants (as last seen: in the
    caches, or as written by an earlier sync and not seen there yet, its watch event still
    on the way or the watch being re-established after an outage)."""
    unwanted = {}
    for api_version, kind in kinds:
        for live in cache[api_version, kind].indexed(owner.label):
            if owner.owns(live) and key_of(live) not in wanted:
                unwanted[key_of(live)] = live
    for key, record in member.applied.of(f"{owner.namespace}/{owner.name}"):
        if (
            key not in wanted
            and key[:2] in kinds
            and owner.owns(record.desired)
            and cache[key[0], key[1]].get(cache_key(record.desired)) is None
        ):
            unwanted[key] = record.desired
    return unwanted


def kept(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is to be left on the member rather than deleted
    (``propagator.io/on-delete: Orphan``)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations.get(KEEP_ANNOTATION) == KEEP_VALUE


def to_orphan(unwanted: Mapping[ObjectKey, Mapping[str, Any]]) -> set[ObjectKey]:
    """Of ``unwanted``, those left on the member: the ones marked :func:`kept`, and the
    Namespaces they are in (deleting one deletes what it holds)."""
    keys = {key for key, obj in unwanted.items() if kept(obj)}
    holding = {key[2] for key in keys if key[2]}
    return keys | {key for key in unwanted if key[:2] == NAMESPACES and key[3] in holding}


def unstamped(owner: Owner) -> dict[str, Any]:
    """The merge patch that takes ``owner``'s stamp off an object it leaves behind (with
    a note of where it came from)."""
    return {
        "metadata": {
            "labels": {APP_LABEL: None, MEMBER_LABEL: None},
            "annotations": {
                APP_ANNOTATION: None,
                OWNER_UID_ANNOTATION: None,
                REVISION_ANNOTATION: None,
                ORPHANED_ANNOTATION: f"{owner.namespace}/{owner.name}",
            },
        }
    }
