"""An immutable picture of the fleet for the scheduler, with indexes, published atomically.

A :class:`FleetSnapshot` never changes after it is built; the fleet manager builds a new
one when anything relevant changes and swaps it in with one assignment, so a reader holds
either the old or the new snapshot, never a half-updated one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType
from typing import Any, cast, get_args

from pydantic import ValidationError

from api.quantity import ARITHMETIC, parse_quantities
from api.taints import Taint, TaintEffect
from fleet.columns import Columns

_EMPTY: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """What the scheduler knows of one member cluster."""

    name: str
    labels: Mapping[str, str]
    layer: str
    region: str | None = None
    zone: str | None = None
    provider: str | None = None
    taints: tuple[Taint, ...] = ()
    ready: bool = False
    api_enablements: frozenset[tuple[str, str]] = _EMPTY  # type: ignore[assignment]
    """(apiVersion, kind) pairs the member serves."""
    available: Mapping[str, Decimal] = field(default_factory=lambda: MappingProxyType({}))
    allocatable: Mapping[str, Decimal] = field(default_factory=lambda: MappingProxyType({}))
    nodes: int = 0
    """Ready nodes (a DaemonSet runs a pod on each)."""
    not_ready_since: float | None = None
    """When the cluster's Ready condition last left True (epoch seconds), while it is not
    Ready; None while Ready (or never seen)."""
    ready_since: float | None = None
    """When it last became Ready (epoch seconds), while Ready."""
    kubernetes_version: str | None = None
    """Its API server's version, as its MemberCluster's status says (``v1.34.1``)."""
    free_cpu: float | None = field(init=False, default=None)
    """available/allocatable cpu as a float (None: unknown); precomputed for scoring."""
    free_memory: float | None = field(init=False, default=None)
    """available/allocatable memory as a float (None: unknown)."""
    total_cpu: float = field(init=False, default=0.0)
    """allocatable cpu as a float (0: unknown)."""
    total_memory: float = field(init=False, default=0.0)
    """allocatable memory as a float (0: unknown)."""

    def __post_init__(self) -> None:
        for resource in ("cpu", "memory"):
            total = self.allocatable.get(resource)
            if total:
                object.__setattr__(self, f"total_{resource}", float(total))
                if resource in self.available:
                    value = float(ARITHMETIC.divide(self.available[resource], total))
                    object.__setattr__(self, f"free_{resource}", value)


def capacity_only(before: ClusterInfo | None, after: ClusterInfo | None) -> bool:
    """Whether one cluster's ``before`` and ``after`` (in two snapshots) differ in capacity
    alone (allocatable, available, ready nodes): what the pods coming and going on a member
    change, and what only some placements depend on."""
    if before is None or after is None:
        return False
    same_capacity = dataclasses.replace(
        before, available=after.available, allocatable=after.allocatable, nodes=after.nodes
    )
    return same_capacity == after


def _quantities(values: Mapping[str, Any] | None) -> Mapping[str, Decimal]:
    return MappingProxyType(parse_quantities(values))


def _taint(raw: Mapping[str, Any]) -> Taint:
    """A MemberCluster's taint. One written before today's validation (the hub keeps it)
    still keeps applications off, as it reads: an unknown effect counts as NoSchedule, so
    a bad taint never opens a cluster nor stops the scheduler."""
    try:
        return Taint.model_validate(raw)
    except ValidationError:
        effect = raw.get("effect")
        return Taint.model_construct(
            key=str(raw.get("key", "")),
            value=str(raw.get("value", "")),
            effect=cast(TaintEffect, effect if effect in get_args(TaintEffect) else "NoSchedule"),
        )


def cluster_info(member: Mapping[str, Any]) -> ClusterInfo:
    """ClusterInfo from a MemberCluster object (as the hub returns it)."""
    meta, spec = member.get("metadata") or {}, member.get("spec") or {}
    status = member.get("status") or {}
    condition = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    ready = condition is not None and condition.get("status") == "True"
    since = epoch_of(condition.get("lastTransitionTime")) if condition else None
    resources = status.get("resources") or {}
    available = _quantities(resources.get("available"))
    allocatable = _quantities(resources.get("allocatable"))
    enablements = frozenset(
        (e["groupVersion"], kind)
        for e in status.get("apiEnablements") or []
        for kind in e.get("kinds") or []
    )
    return ClusterInfo(
        name=meta["name"],
        labels=MappingProxyType(dict(meta.get("labels") or {})),
        layer=spec.get("layer", "default"),
        region=spec.get("region"),
        zone=spec.get("zone"),
        provider=spec.get("provider"),
        taints=tuple(_taint(t) for t in spec.get("taints") or []),
        ready=ready,
        api_enablements=enablements,
        available=available,
        allocatable=allocatable,
        nodes=int((status.get("nodes") or {}).get("ready") or 0),
        not_ready_since=None if ready else since,
        ready_since=since if ready else None,
        kubernetes_version=_text(status.get("kubernetesVersion")),
    )


def _text(value: Any) -> str | None:
    return value[:64] if isinstance(value, str) and value else None


def epoch_of(timestamp: Any) -> float | None:
    """An RFC 3339 time (``2026-12-01T03:30:00Z``) as epoch seconds, None if unreadable."""
    if not isinstance(timestamp, str):
        return None
    try:
        return dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class ClusterInfoCache:
    """Parsed ClusterInfo per MemberCluster, reused while its resourceVersion is unchanged:
    after one member changes, a rebuild parses one object instead of the whole fleet."""

    def __init__(self) -> None:
        self._by_name: dict[str, tuple[str, ClusterInfo]] = {}

    def infos(self, members: Iterable[Mapping[str, Any]]) -> list[ClusterInfo]:
        """ClusterInfo of every member (objects without a resourceVersion are re-parsed)."""
        fresh: dict[str, tuple[str, ClusterInfo]] = {}
        for member in members:
            meta = member.get("metadata") or {}
            name, version = meta["name"], str(meta.get("resourceVersion", ""))
            cached = self._by_name.get(name)
            info = cached[1] if cached and version and cached[0] == version else None
            fresh[name] = (version, info or cluster_info(member))
        self._by_name = fresh
        return [info for _, info in fresh.values()]


@dataclass(frozen=True)
class FleetSnapshot:
    """Clusters by name, indexed by layer and by label; fleets with their members."""

    generation: int
    built_at: float
    clusters: Mapping[str, ClusterInfo]
    by_layer: Mapping[str, frozenset[str]]
    by_label: Mapping[str, Mapping[str, frozenset[str]]]
    fleets: Mapping[str, frozenset[str]]

    def age_s(self, now: float | None = None) -> float:
        return (time.monotonic() if now is None else now) - self.built_at

    def in_layer(self, layer: str) -> frozenset[str]:
        return self.by_layer.get(layer, _EMPTY)

    def with_label(self, key: str, value: str | None = None) -> frozenset[str]:
        """Clusters that carry ``key`` (with ``value`` when given)."""
        values = self.by_label.get(key)
        if values is None:
            return _EMPTY
        if value is not None:
            return values.get(value, _EMPTY)
        return frozenset().union(*values.values())

    def fleet(self, name: str) -> frozenset[str]:
        return self.fleets.get(name, _EMPTY)

    @functools.cached_property
    def columns(self) -> Columns:
        """The clusters as columns, built on first use (once per generation: the
        snapshot never changes) — from the previous generation's where it had built them,
        redoing only the clusters that changed."""
        before: Columns | None = self.__dict__.pop("_previous_columns", None)
        return before.updated(self.clusters) if before is not None else Columns(self.clusters)


def build_snapshot(
    clusters: Iterable[ClusterInfo],
    fleets: Mapping[str, Iterable[str]],
    generation: int,
    now: float | None = None,
    previous: FleetSnapshot | None = None,
) -> FleetSnapshot:
    """Index ``clusters`` into a new snapshot (``previous``: the one it replaces, whose
    indexes are patched for the clusters that changed — a ClusterInfo that is not the
    previous one's object — and whose columns, if built, its own are made from)."""
    by_name = {c.name: c for c in clusters}
    indexes = _patched(previous, by_name) if previous is not None else None
    if indexes is None:
        indexes = _indexed(by_name.values())
    by_layer, by_label = indexes
    snapshot = FleetSnapshot(
        generation=generation,
        built_at=time.monotonic() if now is None else now,
        clusters=MappingProxyType(by_name),
        by_layer=by_layer,
        by_label=by_label,
        fleets=MappingProxyType(
            {name: frozenset(by_name.keys() & set(names)) for name, names in fleets.items()}
        ),
    )
    built = previous.__dict__.get("columns") if previous is not None else None
    if built is not None:
        snapshot.__dict__["_previous_columns"] = built  # no chain: columns hold no snapshot
    return snapshot


_Indexes = tuple[Mapping[str, frozenset[str]], Mapping[str, Mapping[str, frozenset[str]]]]
"""A snapshot's clusters by layer, and by label key and value."""


def _indexed(clusters: Iterable[ClusterInfo]) -> _Indexes:
    """The indexes of ``clusters``, from scratch."""
    layers: dict[str, set[str]] = {}
    labels: dict[str, dict[str, set[str]]] = {}
    for c in clusters:
        layers.setdefault(c.layer, set()).add(c.name)
        for key, value in c.labels.items():
            labels.setdefault(key, {}).setdefault(value, set()).add(c.name)
    return (
        MappingProxyType({k: frozenset(v) for k, v in layers.items()}),
        MappingProxyType(
            {
                k: MappingProxyType({v: frozenset(n) for v, n in vals.items()})
                for k, vals in labels.items()
            }
        ),
    )


def _patched(previous: FleetSnapshot, by_name: Mapping[str, ClusterInfo]) -> _Indexes | None:
    """``previous``'s indexes with the clusters of ``by_name`` that changed (or came or
    went) moved: work for what changed, plus a copy of each index entry it touches. None
    when most of the fleet changed (indexing from scratch is then as cheap)."""
    before = previous.clusters
    changed = [n for n, c in by_name.items() if before.get(n) is not c]
    changed += before.keys() - by_name.keys()  # gone
    if 4 * len(changed) > len(by_name) + 8:
        return None
    layer_moves: dict[str, tuple[set[str], set[str]]] = {}  # layer -> (out, in)
    label_moves: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    for name in changed:
        for info, side in ((before.get(name), 0), (by_name.get(name), 1)):
            if info is None:
                continue
            layer_moves.setdefault(info.layer, (set(), set()))[side].add(name)
            for pair in info.labels.items():
                label_moves.setdefault(pair, (set(), set()))[side].add(name)
    layers = dict(previous.by_layer)
    for layer, (out, into) in layer_moves.items():
        _move(layers, layer, out, into)
    labels = {key: dict(previous.by_label.get(key, {})) for key in {k for k, _ in label_moves}}
    for (key, value), (out, into) in label_moves.items():
        _move(labels.setdefault(key, {}), value, out, into)
    by_label = dict(previous.by_label)
    for key, values in labels.items():
        if values:
            by_label[key] = MappingProxyType(values)
        else:
            by_label.pop(key, None)
    return MappingProxyType(layers), MappingProxyType(by_label)


def _move(index: dict[str, frozenset[str]], entry: str, out: set[str], into: set[str]) -> None:
    """Take ``out`` from ``index[entry]`` and put ``into`` in; an entry left empty goes."""
    names = (index.get(entry, _EMPTY) - out) | into
    if names:
        index[entry] = names
    else:
        index.pop(entry, None)
