"""What the platform keeps in a tenant's member namespace besides its quota: the default
LimitRange and NetworkPolicy a TenantQuota's ``spec.namespaceDefaults`` asks for.

Pure: the objects as they are written (the keeper stamps and applies them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from propagator.tenancy.namespacelabels import TENANT_LABEL, tenant_label_value

LIMIT_RANGE = ("v1", "LimitRange")
NETWORK_POLICY = ("networking.k8s.io/v1", "NetworkPolicy")


def limit_range(name: str, defaults: Mapping[str, Any]) -> dict[str, Any] | None:
    """The LimitRange ``defaults`` (``spec.namespaceDefaults``) asks for, or None."""
    items = defaults.get("limits")
    if not isinstance(items, list) or not items:
        return None
    limits = [
        {k: v for k, v in item.items() if v not in ({}, None)}
        for item in items
        if isinstance(item, Mapping)
    ]
    return {
        "apiVersion": LIMIT_RANGE[0],
        "kind": LIMIT_RANGE[1],
        "metadata": {"name": name},
        "spec": {"limits": limits},
    }


def network_policy(name: str, tenant: str, defaults: Mapping[str, Any]) -> dict[str, Any] | None:
    """The NetworkPolicy ``defaults`` asks for, or None: every pod of the namespace
    takes connections only from the tenant's namespaces on that member (or its own
    namespace) and the namespaces the platform names."""
    isolation = defaults.get("networkPolicy")
    if not isinstance(isolation, Mapping):
        return None
    if isolation.get("ingressFrom") == "SameNamespace":
        peers: list[dict[str, Any]] = [{"podSelector": {}}]
    else:
        peers = [{"namespaceSelector": {"matchLabels": {TENANT_LABEL: tenant_label_value(tenant)}}}]
    for selector in isolation.get("allowedNamespaces") or []:
        peers.append({"namespaceSelector": dict(selector)})
    return {
        "apiVersion": NETWORK_POLICY[0],
        "kind": NETWORK_POLICY[1],
        "metadata": {"name": name},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": peers}]},
    }
