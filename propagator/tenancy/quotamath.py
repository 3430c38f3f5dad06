"""Tenant quota arithmetic: what a tenant may still use on each member cluster."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from api.quantity import arithmetic, parse_quantities
from api.selectors import selects, stored_selector

Remaining = dict[str, dict[str, Decimal]]


def tenant_of(
    quotas: Iterable[Mapping[str, Any]],
    namespace: str,
    namespace_labels: Mapping[str, str] | None = None,
) -> Mapping[str, Any] | None:
    """The TenantQuota that owns ``namespace`` (by name, else by selector), if any."""
    candidates = sorted(quotas, key=lambda q: q["metadata"]["name"])
    for quota in candidates:
        names: list[str] = (quota.get("spec") or {}).get("namespaces") or []
        if namespace in names:
            return quota
    if namespace_labels is not None:
        for quota in candidates:
            selector = (quota.get("spec") or {}).get("namespaceSelector")
            if selector is not None and selects(stored_selector(selector), namespace_labels):
                return quota
    return None


def hard_for(
    quota: Mapping[str, Any], cluster: str, labels: Mapping[str, str]
) -> dict[str, Decimal]:
    """The limits in force on one cluster: the first matching per-cluster entry, else hard."""
    spec = quota.get("spec") or {}
    for entry in spec.get("clusters") or []:
        names = entry.get("clusterNames") or []
        selector = entry.get("clusterSelector")
        if cluster in names or (
            selector is not None and selects(stored_selector(selector), labels)
        ):
            return parse_quantities(entry.get("hard") or {})
    return parse_quantities(spec.get("hard") or {})


def remaining(
    quota: Mapping[str, Any],
    clusters: Mapping[str, Mapping[str, str]],
    own: Mapping[str, Mapping[str, Decimal]] | None = None,
    planned: Mapping[str, Mapping[str, Decimal]] | None = None,
) -> Remaining:
    """Per cluster (name -> labels given), the limits minus what the tenant already uses
    there, never below zero. What it uses is the larger of what the members report
    (``status.clusters[].used``) and what its applications' plans ask (``planned``: not
    applied yet is not free); ``own``, the application being placed, keeps its room.
    ``requests.cpu`` style keys count as ``cpu``."""
    used_by = {
        c["name"]: parse_quantities(c.get("used") or {})
        for c in (quota.get("status") or {}).get("clusters") or []
    }
    result: Remaining = {}
    for name, labels in clusters.items():
        hard = {k.removeprefix("requests."): v for k, v in hard_for(quota, name, labels).items()}
        used = {k.removeprefix("requests."): v for k, v in used_by.get(name, {}).items()}
        mine, asked = (own or {}).get(name, {}), (planned or {}).get(name, {})
        with arithmetic():
            result[name] = {
                k: max(
                    Decimal(0),
                    v - max(used.get(k, Decimal(0)), asked.get(k, Decimal(0))) + mine.get(k, 0),
                )
                for k, v in hard.items()
            }
    return result
