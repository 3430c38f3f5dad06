"""Which wave each placed cluster belongs to (pure): by the groups in order (the first
that names or selects a cluster takes it; those none picks form a last wave), or by a
size (a number or a percentage of the placed clusters, in the order of their names)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from api.rollout import Waves, count_of
from api.selectors import selects

REST = "rest"
"""The name of the last wave: the placed clusters no group picks."""


@dataclass(frozen=True)
class Wave:
    """One wave: its name, its clusters (sorted) and whether it waits for promote."""

    name: str
    clusters: tuple[str, ...]
    manual: bool = False


@dataclass(frozen=True)
class Grouping:
    """The waves of one plan, and what the status notes of how they were made."""

    waves: tuple[Wave, ...]
    notes: tuple[str, ...] = ()
    """Clusters two groups pick (they go with the first), groups that pick none."""

    def index_of(self, cluster: str) -> int | None:
        return next((i for i, w in enumerate(self.waves) if cluster in w.clusters), None)


def waves_of(
    spec: Waves | None,
    clusters: Collection[str],
    labels: Mapping[str, Mapping[str, str]],
    first: Collection[str] = (),
) -> Grouping:
    """The waves of ``clusters`` (the placed ones; ``labels`` by cluster) by ``spec`` (None:
    one wave of them all). ``first``: clusters that went ahead of the waves (a canary's):
    they are in none."""
    rest = sorted(c for c in clusters if c not in first)
    if spec is None:
        return Grouping((Wave("all", tuple(rest)),))
    if spec.size is not None:
        size = count_of(spec.size, len(rest), at_least_one=True)
        chunks = [rest[i : i + size] for i in range(0, len(rest), size)] or [[]]
        return Grouping(tuple(Wave(f"wave-{i + 1}", tuple(c)) for i, c in enumerate(chunks)))
    taken: dict[str, str] = {}
    notes: list[str] = []
    waves: list[Wave] = []
    for group in spec.groups:
        named = set(group.clusters)
        picked = []
        for cluster in rest:
            if cluster not in named and (
                group.cluster_selector is None
                or not selects(group.cluster_selector, labels.get(cluster) or {})
            ):
                continue
            if cluster in taken:
                notes.append(f"{cluster} matches groups {taken[cluster]} and {group.name}")
                continue
            taken[cluster] = group.name
            picked.append(cluster)
        if not picked:
            notes.append(f"group {group.name} picks no placed cluster")
        waves.append(Wave(group.name, tuple(picked), group.manual))
    left = tuple(c for c in rest if c not in taken)
    if left:
        waves.append(Wave(REST, left))
    return Grouping(tuple(waves), tuple(notes))


def tolerated(spec: Waves | None, wave: Sequence[str]) -> int:
    """How many clusters of ``wave`` may stay unhealthy while it passes."""
    if spec is None:
        return 0
    return count_of(spec.max_unhealthy, len(wave))
