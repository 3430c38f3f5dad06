"""Choosing among feasible clusters: best scores first, spread over groups, min/max."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from api.placement import Placement
from fleet.snapshot import ClusterInfo
from propagator.scheduler.types import cluster_field


@dataclass(frozen=True)
class Selection:
    chosen: tuple[ClusterInfo, ...]
    problem: str | None = None
    """Why the placement cannot be satisfied (None when it can)."""
    dropped: tuple[tuple[str, str], ...] = ()
    """(cluster, reason) for feasible clusters that spread could not use."""


def select(ranked: Sequence[ClusterInfo], placement: Placement) -> Selection:
    """Pick clusters from ``ranked`` (best first, ties already broken by name)."""
    limit = placement.max_clusters or len(ranked)
    minimum = placement.min_clusters if placement.min_clusters is not None else 1
    spread = placement.spread
    dropped: list[tuple[str, str]] = []
    if spread is None:
        chosen = list(ranked[:limit])
    else:
        what = spread.by_label or spread.by_field or ""
        groups: dict[str, list[ClusterInfo]] = {}
        for c in ranked:
            value = cluster_field(c, spread.by_field, spread.by_label)
            if value is None:
                dropped.append((c.name, f"no {what} to spread by"))
                continue
            groups.setdefault(value, []).append(c)  # dicts keep order: best group first
        ordered = list(groups.values())
        if spread.max_groups is not None:
            for group in ordered[spread.max_groups :]:
                dropped += [(c.name, f"beyond maxGroups {spread.max_groups}") for c in group]
            ordered = ordered[: spread.max_groups]
        need_groups = spread.min_groups or 1
        if len(ordered) < need_groups:
            return Selection(
                (),
                f"only {len(ordered)} {what} group(s) fit; minGroups is {need_groups}",
                tuple(dropped),
            )
        if limit < need_groups:
            return Selection(
                (), f"maxClusters {limit} cannot cover minGroups {need_groups}", tuple(dropped)
            )
        # The best cluster of each group first (so groups are covered), then the best rest.
        chosen = [group[0] for group in ordered][:limit]
        picked = {c.name for c in chosen}
        allowed = {c.name for group in ordered for c in group}
        rest = [c for c in ranked if c.name not in picked and c.name in allowed]
        chosen += rest[: limit - len(chosen)]
        order = {c.name: i for i, c in enumerate(ranked)}
        chosen.sort(key=lambda c: order[c.name])
    if len(chosen) < minimum:
        return Selection(
            tuple(chosen), f"{len(chosen)} cluster(s) fit; minClusters is {minimum}", tuple(dropped)
        )
    return Selection(tuple(chosen), None, tuple(dropped))
