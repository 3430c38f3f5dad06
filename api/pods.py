"""What a pod requests, as the Kubernetes scheduler and resource quotas count it (pure).

The larger of its containers (plus restartable init containers, i.e. sidecars, which run
beside them) and its largest init container (plus the sidecars started before it), plus
its overhead. A container with limits and no requests requests its limits, as the API
server defaults it; one with neither requests its namespace's LimitRange default
(``defaults``) when there is one, as the LimitRanger admission plugin sets it. A value that
is not a quantity (a template expression not rendered yet) counts as nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any

from api.quantity import QuantityError, arithmetic, parse_quantity

RESOURCES = ("cpu", "memory")


def _amount(value: Any) -> Decimal:
    try:
        return parse_quantity(value)
    except QuantityError:
        return Decimal(0)  # not a quantity (yet): counts as nothing


def _stated(container: Mapping[str, Any], resource: str) -> Any:
    """The container's own request for ``resource`` (its limit when it has no request, as
    the API server defaults it), or None."""
    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    if resource in requests:
        return requests[resource]
    return limits.get(resource)


def _container(
    container: Mapping[str, Any], resource: str, defaults: Mapping[str, Decimal]
) -> Decimal:
    stated = _stated(container, resource)
    if stated is None:
        return defaults.get(resource, Decimal(0))
    return _amount(stated)


def _containers(pod_spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for group in ("initContainers", "containers"):
        for container in pod_spec.get(group) or []:
            if isinstance(container, Mapping):
                yield container


def unrequested(
    pod_spec: Mapping[str, Any], resources: Iterable[str], defaults: Mapping[str, Decimal]
) -> list[tuple[str, str]]:
    """(container, resource) for each of ``resources`` a container of ``pod_spec`` neither
    requests nor limits and its namespace has no default for: what a ResourceQuota on that
    resource refuses ("must specify")."""
    wanted = [r for r in resources if r not in defaults]
    return [
        (str(c.get("name", "")), r)
        for c in _containers(pod_spec)
        for r in wanted
        if _stated(c, r) is None
    ]


def pod_requests(
    pod_spec: Mapping[str, Any], defaults: Mapping[str, Decimal] | None = None
) -> dict[str, Decimal]:
    """What one pod of ``pod_spec`` requests: ``pods`` 1, and ``cpu`` and ``memory``
    when it asks for any. ``defaults``: the namespace's LimitRange default requests."""
    defaults = defaults or {}
    total: dict[str, Decimal] = {"pods": Decimal(1)}
    with arithmetic():
        for resource in RESOURCES:
            running = sum(
                (_container(c, resource, defaults) for c in pod_spec.get("containers") or []),
                Decimal(0),
            )
            sidecars = init_peak = Decimal(0)
            for init in pod_spec.get("initContainers") or []:
                amount = _container(init, resource, defaults)
                if init.get("restartPolicy") == "Always":
                    sidecars += amount  # runs beside everything started after it
                else:
                    init_peak = max(init_peak, sidecars + amount)
            overhead = _amount((pod_spec.get("overhead") or {}).get(resource, 0))
            amount = max(running + sidecars, init_peak) + overhead
            if amount:
                total[resource] = amount
    return total
