"""Applying rendered objects to one member: namespaces first, unchanged objects skipped.

Each object is stamped with its owner and a content hash of itself; an object whose live
copy already carries that hash is not written again (server-side apply is idempotent, but
not free).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet.connection import ApiError, KubeConnection
from propagator.propagation.resources import REVISION_ANNOTATION, revision_of, stamp


def _live(conn: KubeConnection, obj: dict[str, Any]) -> dict[str, Any] | None:
    meta = obj["metadata"]
    try:
        return conn.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


def in_default_namespace(
    conn: KubeConnection, objects: Sequence[dict[str, Any]], namespace: str
) -> list[dict[str, Any]]:
    """The objects with ``namespace`` set on the namespaced ones that have none."""
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        if meta.get("namespace") or not conn.resource(obj["apiVersion"], obj["kind"]).namespaced:
            out.append(obj)
        else:
            out.append({**obj, "metadata": {**meta, "namespace": namespace}})
    return out


def ensure_namespaces(
    conn: KubeConnection, objects: Sequence[dict[str, Any]], field_manager: str
) -> list[str]:
    """Create the namespaces the objects live in when the member lacks them; returns those
    created."""
    created = []
    wanted = sorted(
        {
            o["metadata"]["namespace"]
            for o in objects
            if (o.get("metadata") or {}).get("namespace")
            and conn.resource(o["apiVersion"], o["kind"]).namespaced
        }
    )
    for namespace in wanted:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        if _live(conn, ns) is None:
            conn.apply(ns, field_manager=field_manager)
            created.append(namespace)
    return created


def apply_objects(
    conn: KubeConnection,
    objects: Sequence[dict[str, Any]],
    *,
    app_namespace: str,
    app_name: str,
    field_manager: str = "propagator",
    timeout_s: float | None = None,
) -> int:
    """Apply every object (stamped with owner and content hash) that differs from what the
    member holds; returns the number of objects written. Namespaces are looked at only
    when an object is missing (an object that exists has its namespace)."""
    stale = []
    for obj in objects:
        desired = stamp(obj, app_namespace, app_name, revision_of([obj]))
        live = _live(conn, desired)
        applied = ((live or {}).get("metadata") or {}).get("annotations") or {}
        revision = desired["metadata"]["annotations"][REVISION_ANNOTATION]
        if live is None or applied.get(REVISION_ANNOTATION) != revision:
            stale.append((desired, live is None))
    missing = [desired for desired, absent in stale if absent]
    if missing:
        ensure_namespaces(conn, missing, field_manager)
    for desired, _ in stale:
        conn.apply(desired, field_manager=field_manager, timeout_s=timeout_s)
    return len(stale)
