"""The labels the platform keeps on a tenant's member namespaces: which tenant it is (the
default NetworkPolicy selects the tenant's namespaces by it) and its Pod Security level,
for the member's own Pod Security Admission.

Pure.
"""

from __future__ import annotations

import hashlib

from propagator.tenancy.podsecurity import Level

POD_SECURITY_PREFIX = "pod-security.kubernetes.io/"
TENANT_LABEL = "propagator.io/tenant"
"""On a member namespace: the tenant it belongs to (a hash when the name is too long)."""
MODES = ("enforce", "audit", "warn")
"""Pod Security Admission modes: refuse, record in the audit log, warn the client."""


def tenant_label_value(tenant: str) -> str:
    """A label value naming the tenant (a hash beyond 63 characters)."""
    return tenant if len(tenant) <= 63 else hashlib.sha256(tenant.encode()).hexdigest()[:40]


PLATFORM_OBJECT_PREFIX = "propagator-tenant-"


def platform_object_name(tenant: str) -> str:
    """The name of what the platform keeps for ``tenant`` in each of its namespaces (its
    ResourceQuota, LimitRange, NetworkPolicy; names over 63 characters are shortened)."""
    name = f"{PLATFORM_OBJECT_PREFIX}{tenant}"
    if len(name) <= 63:
        return name
    return f"{PLATFORM_OBJECT_PREFIX}{hashlib.sha256(f'/{tenant}'.encode()).hexdigest()[:40]}"


def namespace_labels(tenant: str, level: Level) -> dict[str, str]:
    """The labels of a member namespace of ``tenant`` at ``level``, at the latest policy
    version of each member."""
    labels = {f"{POD_SECURITY_PREFIX}{mode}": str(level) for mode in MODES}
    labels |= {f"{POD_SECURITY_PREFIX}{mode}-version": "latest" for mode in MODES}
    labels[TENANT_LABEL] = tenant_label_value(tenant)
    return labels


def platform_label(key: str) -> bool:
    """Whether a namespace label is the platform's to set (not an application's)."""
    return key.startswith(POD_SECURITY_PREFIX) or key == TENANT_LABEL
