"""How a tenant may expose what it runs: Service types, external IPs, ingress and gateway
classes (TenantQuota ``spec.services``).

Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
"""The class an Ingress names in the way older controllers read."""


@dataclass(frozen=True)
class Exposure:
    """What the tenant's applications may expose."""

    service_types: frozenset[str] = frozenset({"ClusterIP"})
    external_ips: bool = False
    ingress_classes: frozenset[str] | None = None
    """None: any class."""
    gateway_classes: frozenset[str] | None = None
    """None: any class."""

    @classmethod
    def of(cls, services: Mapping[str, Any] | None) -> Exposure:
        """From a TenantQuota's ``spec.services`` (None: the defaults)."""
        if not isinstance(services, Mapping):
            return cls()
        types = services.get("types")

        def classes(field: str) -> frozenset[str] | None:
            value = services.get(field)
            return None if value is None else frozenset(str(v) for v in value)

        return cls(
            frozenset(str(t) for t in types) if isinstance(types, list) else cls.service_types,
            services.get("externalIPs") is True,
            classes("ingressClasses"),
            classes("gatewayClasses"),
        )


def exposure_problem(obj: Mapping[str, Any], exposure: Exposure) -> str | None:
    """Why ``obj`` exposes more than ``exposure`` allows, or None."""
    group = str(obj.get("apiVersion")).rpartition("/")[0]
    kind = obj.get("kind")
    spec = _map(obj.get("spec"))
    if (group, kind) == ("", "Service"):
        return _service_problem(spec, exposure)
    if (group, kind) == ("networking.k8s.io", "Ingress") and exposure.ingress_classes is not None:
        annotations = _map(_map(obj.get("metadata")).get("annotations"))
        named = {
            "spec.ingressClassName": spec.get("ingressClassName"),
            f"annotation {INGRESS_CLASS_ANNOTATION}": annotations.get(INGRESS_CLASS_ANNOTATION),
        }
        given = {field: value for field, value in named.items() if value is not None}
        allowed = _listed(exposure.ingress_classes)
        if not given:
            return f"an Ingress must set spec.ingressClassName to one of {allowed}"
        for field, value in given.items():
            if value not in exposure.ingress_classes:
                return f"{field} {_shown(value)} is not among the ingress classes {allowed}"
    gateway = ("gateway.networking.k8s.io", "Gateway")
    if (group, kind) == gateway and exposure.gateway_classes is not None:
        value = spec.get("gatewayClassName")
        if value not in exposure.gateway_classes:
            allowed = _listed(exposure.gateway_classes)
            return (
                f"spec.gatewayClassName {_shown(value)} is not among the gateway classes {allowed}"
            )
    return None


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _service_problem(spec: Mapping[str, Any], exposure: Exposure) -> str | None:
    kind = spec.get("type", "ClusterIP")
    if kind not in exposure.service_types:
        return (
            f"spec.type {_shown(kind)} is not among the Service types the tenant may use "
            f"{_listed(exposure.service_types)} (TenantQuota spec.services.types)"
        )
    addresses = spec.get("externalIPs")
    if addresses and not exposure.external_ips:
        return (
            f"spec.externalIPs {_shown(addresses)}: external IPs are the platform's "
            "(TenantQuota spec.services.externalIPs is false)"
        )
    return None


def _shown(value: Any) -> str:
    """A value from the tenant, bounded."""
    text = repr(value)
    return text if len(text) <= 100 else text[:100] + "…"


def _listed(values: frozenset[str]) -> str:
    return "[" + ", ".join(sorted(values)) + "]"
