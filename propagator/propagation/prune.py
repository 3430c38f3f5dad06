"""Finding and deleting what an application propagated to a member but no longer wants.

Objects are found by the application's owner label, per kind: the kinds come from the
application's status (``propagatedKinds``: everything it may have left there) and from
what it propagates now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fleet.connection import KubeConnection
from fleet.discovery import UnknownKind
from propagator.propagation.resources import APP_LABEL, ObjectKey, app_label_value, to_prune


def kind_of(obj: Mapping[str, Any]) -> str:
    """``apiVersion/kind``, e.g. ``apps/v1/Deployment`` or ``v1/ConfigMap``."""
    return f"{obj.get('apiVersion')}/{obj.get('kind')}"


def kinds_of(objects: Iterable[Mapping[str, Any]]) -> set[str]:
    return {kind_of(o) for o in objects}


def owned_objects(
    conn: KubeConnection, kinds: Iterable[str], namespace: str, name: str
) -> list[dict[str, Any]]:
    """Every object of ``kinds`` on the member labelled as this application's (any
    namespace). A kind the member does not serve holds nothing."""
    found = []
    selector = f"{APP_LABEL}={app_label_value(namespace, name)}"
    for kind_key in sorted(set(kinds)):
        api_version, kind = kind_key.rsplit("/", 1)
        try:
            items = conn.list(api_version, kind, None, labelSelector=selector)["items"]
        except UnknownKind:
            continue
        for item in items:  # list items carry no apiVersion/kind
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        found += items
    return found


def prune(
    conn: KubeConnection,
    kinds: Iterable[str],
    desired: Sequence[Mapping[str, Any]],
    namespace: str,
    name: str,
) -> list[ObjectKey]:
    """Delete this application's objects that are not in ``desired``; returns their keys.
    Namespaces the controller created are left (others may use them)."""
    present = owned_objects(conn, set(kinds) | kinds_of(desired), namespace, name)
    deleted = []
    for key in to_prune(present, desired, namespace, name):
        api_version, kind, obj_namespace, obj_name = key
        if conn.delete(api_version, kind, obj_name, obj_namespace or None):
            deleted.append(key)
    return deleted
