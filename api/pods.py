"""What a pod requests, as the Kubernetes scheduler and resource quotas count it (pure).

The larger of its containers (plus restartable init containers, i.e. sidecars, which run
beside them) and its largest init container (plus the sidecars started before it), plus
its overhead. A container with limits and no requests requests its limits, as the API
server defaults it. A value that is not a quantity (a template expression not rendered
yet) counts as nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from api.quantity import QuantityError, arithmetic, parse_quantity

RESOURCES = ("cpu", "memory")


def _amount(value: Any) -> Decimal:
    try:
        return parse_quantity(value)
    except QuantityError:
        return Decimal(0)  # not a quantity (yet): counts as nothing


def _container(container: Mapping[str, Any], resource: str) -> Decimal:
    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    if resource in requests:
        return _amount(requests[resource])
    return _amount(limits.get(resource, 0))  # requests default to limits


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """What one pod of ``pod_spec`` requests: ``pods`` 1, and ``cpu`` and ``memory``
    when it asks for any."""
    total: dict[str, Decimal] = {"pods": Decimal(1)}
    with arithmetic():
        for resource in RESOURCES:
            running = sum(
                (_container(c, resource) for c in pod_spec.get("containers") or []), Decimal(0)
            )
            sidecars = init_peak = Decimal(0)
            for init in pod_spec.get("initContainers") or []:
                amount = _container(init, resource)
                if init.get("restartPolicy") == "Always":
                    sidecars += amount  # runs beside everything started after it
                else:
                    init_peak = max(init_peak, sidecars + amount)
            overhead = _amount((pod_spec.get("overhead") or {}).get(resource, 0))
            amount = max(running + sidecars, init_peak) + overhead
            if amount:
                total[resource] = amount
    return total
