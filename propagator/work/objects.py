"""How propagated objects are owned and revised.

Every propagated object
carries a label and annotations naming its application and the revision it was rendered
from, so that what is no longer desired can be found and deleted on each member, and an
unchanged revision needs no write.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kube.keys import ObjectKey

APP_LABEL = "propagator.io/application"
"""Label with a hash of namespace/name (label values are short); for list calls."""
APP_ANNOTATION = "propagator.io/application"
"""Annotation with the owning application as namespace/name."""
OWNER_UID_ANNOTATION = "propagator.io/owner-uid"
"""Annotation with the owning application's UID: prune and clean-up delete only these."""
REVISION_ANNOTATION = "propagator.io/revision"
"""Annotation with the revision (content hash) the object was rendered from."""
ORPHANED_ANNOTATION = "propagator.io/orphaned-from"
"""On an object an application left behind (``propagator.io/on-delete: Orphan``): which
application, as namespace/name."""
TENANT_ANNOTATION = "propagator.io/tenant"
"""On the objects the platform keeps in a tenant's member namespaces (its ResourceQuota,
LimitRange, NetworkPolicy): the TenantQuota they stand for."""
MEMBER_LABEL = "propagator.io/member-cluster"
"""Label naming the MemberCluster an object was propagated through: a member's caches
list only objects carrying its own name, so MemberClusters that share an API server never
cache (or take over) each other's objects."""

_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "managedFields",
    "creationTimestamp",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
)
_CLIENT_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def app_label_value(namespace: str, name: str) -> str:
    """A label value naming the application (a hash: namespace/name may exceed 63 chars)."""
    return hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:40]


def member_label_value(cluster: str) -> str:
    """The member label's value: the MemberCluster's name, or a hash of it when it is
    longer than a label value may be (63 characters)."""
    return cluster if len(cluster) <= 63 else hashlib.sha256(cluster.encode()).hexdigest()[:40]


def member_selector(cluster: str) -> str:
    """The label selector of a member's caches: our objects propagated through it."""
    return f"{APP_LABEL},{MEMBER_LABEL}={member_label_value(cluster)}"


def strip_server_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A hub object as a manifest: status and server-populated metadata removed."""
    clean = copy.deepcopy(dict(obj))
    clean.pop("status", None)
    meta = clean.get("metadata") or {}
    for key in _SERVER_METADATA:
        meta.pop(key, None)
    annotations = meta.get("annotations") or {}
    for key in _CLIENT_ANNOTATIONS:
        annotations.pop(key, None)
    if "annotations" in meta and not annotations:
        del meta["annotations"]
    return clean


def kind_of(obj: Mapping[str, Any]) -> str:
    """``apiVersion/kind``, e.g. ``apps/v1/Deployment`` or ``v1/ConfigMap``."""
    return f"{obj.get('apiVersion')}/{obj.get('kind')}"


def kinds_of(objects: Iterable[Mapping[str, Any]]) -> set[str]:
    return {kind_of(o) for o in objects}


def key_of(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion")),
        str(obj.get("kind")),
        str(meta.get("namespace") or ""),
        str(meta.get("name")),
    )


def revision_of(objects: Iterable[Mapping[str, Any]]) -> str:
    """A content hash of rendered objects: equal objects, equal revision (key order
    ignored)."""
    canonical = json.dumps(
        sorted((dict(o) for o in objects), key=key_of), sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Owner:
    """The application that owns propagated objects, by namespace, name and UID."""

    namespace: str
    name: str
    uid: str

    def stamp(self, obj: Mapping[str, Any], revision: str, cluster: str) -> dict[str, Any]:
        """The object with its owner and member labels and annotations, as propagated
        through MemberCluster ``cluster``: a new object, its metadata, labels and
        annotations new too, the rest shared with ``obj`` (rendered objects are never
        changed in place: each stamped copy of every object on every member, kept as
        what was applied, would otherwise hold a whole copy of it)."""
        out = dict(obj)
        meta = out["metadata"] = dict(out.get("metadata") or {})
        labels = meta["labels"] = dict(meta.get("labels") or {})
        annotations = meta["annotations"] = dict(meta.get("annotations") or {})
        labels[APP_LABEL] = self.label
        labels[MEMBER_LABEL] = member_label_value(cluster)
        annotations[APP_ANNOTATION] = f"{self.namespace}/{self.name}"
        annotations[OWNER_UID_ANNOTATION] = self.uid
        annotations[REVISION_ANNOTATION] = revision
        return out

    @functools.cached_property
    def label(self) -> str:
        """The value of :data:`APP_LABEL` on this application's objects."""
        return app_label_value(self.namespace, self.name)

    def owns(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` was propagated by this application: label, annotation and UID
        all name it (a label alone anyone could set; a UID tells a re-created application
        of the same name apart)."""
        return owner_label_of(obj) == self.label and self.annotated(obj)

    def annotated(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj``'s annotations name this application and its UID, whatever its
        labels say (someone may have removed our label: the object is still ours)."""
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        return (
            annotations.get(APP_ANNOTATION) == f"{self.namespace}/{self.name}"
            and annotations.get(OWNER_UID_ANNOTATION) == self.uid
        )


def owner_label_of(obj: Mapping[str, Any]) -> str | None:
    """The value of :data:`APP_LABEL` on ``obj`` (what a member's caches index it by)."""
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(APP_LABEL)
    return value if isinstance(value, str) else None


def owner_named(obj: Mapping[str, Any]) -> str | None:
    """Who an object's stamp says it belongs to (``application shop/web``, or the
    platform for what it keeps for a tenant), if it has one."""
    meta = obj.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    if tenant := annotations.get(TENANT_ANNOTATION):
        return f"the platform (it keeps it for TenantQuota {str(tenant)[:253]})"
    if APP_LABEL not in labels and APP_ANNOTATION not in annotations:
        return None
    if application := annotations.get(APP_ANNOTATION):
        return f"application {str(application)[:300]}"
    return "an application (label only)"
