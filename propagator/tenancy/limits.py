"""A member's LimitRange defaults and what a quota refuses without them (pure).

A container that states neither requests nor limits for a resource gets its namespace's
LimitRange default request (the LimitRanger admission plugin), and is refused by a
ResourceQuota on that resource when there is none ("must specify cpu"). The hub counts
and refuses the same way before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any, Protocol

from api.pods import RESOURCES, unrequested
from api.quantity import QuantityError, parse_quantity
from propagator.interpreter.registry import Interpreters
from propagator.scheduler.demand import pod_spec_of

ContainerDefaults = dict[str, dict[str, Decimal]]
"""namespace -> resource -> the default request of a container there."""


class Listing(Protocol):
    """What is read of a member's LimitRange cache."""

    @property
    def synced(self) -> bool: ...

    def snapshot(self) -> list[dict[str, Any]]: ...


def _quantities(values: Any) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for resource in RESOURCES:
        value = values.get(resource) if isinstance(values, Mapping) else None
        if value is None:
            continue
        try:
            out[resource] = parse_quantity(value)
        except QuantityError:
            continue  # the member's API server validated it; not ours to guess
    return out


def _item_defaults(item: Mapping[str, Any]) -> dict[str, Decimal]:
    """A Container item's default requests, completed as the API server defaults a
    LimitRange: ``default`` from ``max``, ``defaultRequest`` from ``default``, then
    ``min``."""
    default = {**_quantities(item.get("max")), **_quantities(item.get("default"))}
    return {
        **_quantities(item.get("min")),
        **default,
        **_quantities(item.get("defaultRequest")),
    }


def container_defaults(limit_ranges: Iterable[Mapping[str, Any]]) -> ContainerDefaults:
    """Per namespace, the default requests its LimitRanges give a container. With several
    LimitRanges in one namespace the first by name sets a resource (the admission plugin
    applies them in turn and never overrides a value already set)."""
    out: ContainerDefaults = {}
    ordered = sorted(
        limit_ranges,
        key=lambda o: (
            str((o.get("metadata") or {}).get("namespace")),
            str((o.get("metadata") or {}).get("name")),
        ),
    )
    for limit_range in ordered:
        namespace = str((limit_range.get("metadata") or {}).get("namespace") or "")
        for item in (limit_range.get("spec") or {}).get("limits") or []:
            if not isinstance(item, Mapping) or item.get("type") != "Container":
                continue
            into = out.setdefault(namespace, {})
            for resource, amount in _item_defaults(item).items():
                into.setdefault(resource, amount)
    return out


def requests_missing(
    objects: Iterable[Mapping[str, Any]],
    limited: Iterable[str],
    defaults: Mapping[str, Mapping[str, Decimal]],
    default_namespace: str,
    interpreters: Interpreters | None = None,
) -> list[str]:
    """What a quota limiting ``limited`` (cpu, memory) would refuse among ``objects``:
    ``Deployment ns/web container app: no cpu request`` for each container that states
    neither a request nor a limit and whose namespace has no LimitRange default."""
    resources = [r for r in RESOURCES if r in set(limited)]
    found = []
    for obj in objects:
        pod_spec = pod_spec_of(obj, interpreters) if resources else None
        if pod_spec is None:
            continue
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or default_namespace)
        for container, resource in unrequested(pod_spec, resources, defaults.get(namespace, {})):
            found.append(
                f"{obj.get('kind')} {namespace}/{meta.get('name')} container {container}: "
                f"no {resource} request"
            )
    return found


class LimitDefaults:
    """Each member's LimitRange defaults, read from its LimitRange cache and kept until
    it changes."""

    def __init__(self, listing: Callable[[str], Listing | None]) -> None:
        self._listing = listing
        self._known: dict[str, ContainerDefaults] = {}
        self._versions: dict[str, int] = {}

    def of(self, cluster: str) -> ContainerDefaults | None:
        """The cluster's defaults per namespace; None until its cache has listed."""
        found = self._known.get(cluster)
        if found is None:
            listing = self._listing(cluster)
            if listing is None or not listing.synced:
                return None
            found = self._known[cluster] = container_defaults(listing.snapshot())
        return found

    def version(self, cluster: str) -> int:
        """Changes whenever the cluster's defaults may have changed."""
        return self._versions.get(cluster, 0)

    def changed(self, cluster: str) -> None:
        """A LimitRange of the cluster changed (or its cache started again)."""
        self._known.pop(cluster, None)
        self._versions[cluster] = self.version(cluster) + 1
