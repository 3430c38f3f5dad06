"""How a Kubernetes object and its kind are named in caches and tables."""

from collections.abc import Mapping
from typing import Any

KindKey = tuple[str, str]
"""(apiVersion, kind)."""
ObjectKey = tuple[str, str, str, str]
"""(apiVersion, kind, namespace or "", name)."""


def cache_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])
