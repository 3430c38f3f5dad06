"""Reflected status fields combined across clusters (ResourceInterpreter ``spec.status``
``aggregate``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from api.interpreter import Aggregate


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def combine(values: Sequence[Any], how: Aggregate) -> Any:
    """The clusters' ``values`` of one field combined ``how``; None when none of them is of
    the type the aggregation takes (numbers for Sum, Min, Max; bools for All, Any)."""
    if how in ("Sum", "Min", "Max"):
        numbers = [v for v in values if _number(v)]
        if not numbers:
            return None
        if how == "Sum":
            return sum(numbers)
        return min(numbers) if how == "Min" else max(numbers)
    if how in ("All", "Any"):
        bools = [v for v in values if isinstance(v, bool)]
        if not bools:
            return None
        return all(bools) if how == "All" else any(bools)
    return None


def combine_objects(
    reports: Iterable[tuple[tuple[str, str, str, str], dict[str, Any], dict[str, Aggregate]]],
) -> list[dict[str, Any]]:
    """Per object (``(apiVersion, kind, namespace, name)``), each aggregated field over
    the clusters that reported it: ``reports`` holds one entry per object per cluster
    (its fields and how each combines)."""
    values: dict[tuple[str, str, str, str], dict[str, list[Any]]] = {}
    hows: dict[tuple[str, str, str, str], dict[str, Aggregate]] = {}
    clusters: dict[tuple[str, str, str, str], int] = {}
    for key, fields, aggregates in reports:
        if not aggregates:
            continue
        clusters[key] = clusters.get(key, 0) + 1
        for name, how in aggregates.items():
            if name in fields:
                values.setdefault(key, {}).setdefault(name, []).append(fields[name])
                hows.setdefault(key, {})[name] = how
    out = []
    for key in sorted(values):
        combined = {
            name: value
            for name, seen in values[key].items()
            if (value := combine(seen, hows[key][name])) is not None
        }
        if not combined:
            continue
        api_version, kind, namespace, name = key
        entry: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "name": name}
        if namespace:
            entry["namespace"] = namespace
        entry.update(fields=combined, clusters=clusters[key])
        out.append(entry)
    return out
