"""Choosing among feasible clusters: best ranked first, spread over the fewest groups that
serve the placement, within min/max clusters, and — when replicas are shared — a set whose
room holds them.

Combinations are tried in rank order (the first one that serves is the best ranked), at
most :data:`MAX_COMBINATIONS` per size; past that the clusters with the most room are
taken, which serve whenever any set of that size does.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import NamedTuple

from api.placement import Placement
from fleet.snapshot import ClusterInfo
from propagator.scheduler.types import spread_group

MAX_COMBINATIONS = 2000
"""Combinations looked at per size before falling back to the ones with the most room."""


Dropped = tuple[tuple[str, str], ...]
"""(cluster, reason) for feasible clusters that spread could not use."""


def _none() -> Dropped:
    return ()


class Selection(NamedTuple):
    chosen: tuple[ClusterInfo, ...]
    """In rank order."""
    problem: str | None = None
    """Why the placement cannot be satisfied (None when it can)."""
    dropped_count: int = 0
    """How many feasible clusters spread could not use."""
    dropped: Callable[[], Dropped] = _none
    """Which ones and why, made when asked (most decisions are read for their placement
    alone)."""


class Room:
    """How many replicas must be held, and how many each cluster can take (``capacity``,
    None: no limit; asked once per cluster, only for the clusters looked at). ``fewest``:
    use as few clusters as hold them (Aggregated)."""

    __slots__ = ("_caps", "capacity", "fewest", "replicas")

    def __init__(
        self,
        replicas: int,
        capacity: Callable[[ClusterInfo], int | None],
        fewest: bool = False,
        known: dict[str, int | None] | None = None,
    ) -> None:
        """``known``: caps ``capacity`` already gave, by name (kept with the snapshot's
        columns; the caps asked here are added to it)."""
        self.replicas = replicas
        self.capacity = capacity
        self.fewest = fewest
        self._caps: dict[str, int | None] = {} if known is None else known

    def cap(self, cluster: ClusterInfo) -> int | None:
        if cluster.name not in self._caps:
            self._caps[cluster.name] = self.capacity(cluster)
        return self._caps[cluster.name]

    def caps_of(self, clusters: Sequence[ClusterInfo]) -> dict[str, int | None]:
        """The cap of each of ``clusters``, by name."""
        caps = self._caps
        try:  # each asked before (the common case)
            return {c.name: caps[c.name] for c in clusters}
        except KeyError:
            return {c.name: caps[c.name] if c.name in caps else self.cap(c) for c in clusters}

    def holds(self, clusters: Sequence[ClusterInfo]) -> bool:
        """Whether ``clusters`` together have room for the replicas."""
        total, caps = 0, self._caps
        for c in clusters:
            cap = caps[c.name] if c.name in caps else self.cap(c)
            if cap is None:
                return True
            total += cap
        return total >= self.replicas

    def largest(self, clusters: Sequence[ClusterInfo], k: int) -> list[ClusterInfo]:
        """The ``k`` clusters with the most room (ties: rank), in rank order."""
        order = {c.name: i for i, c in enumerate(clusters)}
        roomiest = sorted(clusters, key=lambda c: (-(self.cap_of(c)), order[c.name]))[:k]
        return sorted(roomiest, key=lambda c: order[c.name])

    def cap_of(self, cluster: ClusterInfo) -> float:
        cap = self.cap(cluster)
        return float("inf") if cap is None else cap


def _best_fitting(
    ranked: Sequence[ClusterInfo], k: int, room: Room | None
) -> list[ClusterInfo] | None:
    """The best ranked ``k`` clusters of ``ranked`` that hold the replicas; None when no
    ``k`` of them do."""
    if room is None or room.holds(ranked[:k]):
        return list(ranked[:k])
    if not room.holds(room.largest(ranked, k)):
        return None
    for combination in itertools.islice(itertools.combinations(ranked, k), MAX_COMBINATIONS):
        if room.holds(combination):
            return list(combination)
    return room.largest(ranked, k)


def _sizes(minimum: int, limit: int, available: int, room: Room | None, kept: int) -> range:
    """Set sizes to try: the fewest first for Aggregated (never fewer than it runs on),
    else as many as allowed."""
    most = min(limit, available)
    if room is not None and room.fewest:
        return range(min(max(minimum, kept, 1), most), most + 1)
    return range(most, most + 1)


def select(
    ranked: Sequence[ClusterInfo],
    placement: Placement,
    room: Room | None = None,
    kept: int = 0,
) -> Selection:
    """Pick clusters from ``ranked`` (best first, ties already broken; the first ``kept``
    are those the application runs on, which keep their place). With ``room``, a set whose
    room holds the replicas is preferred (the best ranked such set)."""
    limit = placement.max_clusters or len(ranked)
    minimum = placement.min_clusters if placement.min_clusters is not None else 1
    if placement.spread is None:
        chosen: list[ClusterInfo] = list(ranked[:limit])
        for k in _sizes(minimum, limit, len(ranked), room, kept):
            found = _best_fitting(ranked, k, room)
            if found is not None:
                chosen = found
                break
        if len(chosen) < minimum:
            return Selection(
                tuple(chosen), f"{len(chosen)} cluster(s) fit; minClusters is {minimum}"
            )
        return Selection(tuple(chosen))
    return _spread(ranked, placement, limit, minimum, room, kept)


def _spread(
    ranked: Sequence[ClusterInfo],
    placement: Placement,
    limit: int,
    minimum: int,
    room: Room | None,
    kept: int,
) -> Selection:
    """The fewest groups (at least minGroups, at most maxGroups, and at least those the
    application runs in; best ranked first) whose clusters serve the placement: one
    cluster of each group, then the best of the rest."""
    spread = placement.spread
    assert spread is not None
    what = spread.by_label or spread.by_field or ""
    values = list(map(spread_group(spread.by_field, spread.by_label), ranked))
    # group value -> group number, the best ranked group first (dicts keep order)
    number: dict[str | None, int] = {
        v: g for g, v in enumerate([v for v in dict.fromkeys(values) if v is not None])
    }
    of = list(map(number.get, values))  # each ranked cluster's group (None: it has none)
    ungrouped = functools.partial(_ungrouped, ranked, of, what)
    unusable = of.count(None)
    need_groups = spread.min_groups or 1
    most_groups = min(spread.max_groups or len(number), len(number), limit)
    running_in = len(set(of[:kept]) - {None}) if kept else 0
    fewest_groups = min(max(need_groups, running_in), most_groups)
    if len(number) < need_groups:
        return Selection(
            (),
            f"only {len(number)} {what} group(s) fit; minGroups is {need_groups}",
            unusable,
            ungrouped,
        )
    if limit < need_groups:
        return Selection(
            (),
            f"maxClusters {limit} cannot cover minGroups {need_groups}",
            unusable,
            ungrouped,
        )
    numbers = range(len(number))
    for k in range(fewest_groups, most_groups + 1):
        for combination in itertools.islice(itertools.combinations(numbers, k), MAX_COMBINATIONS):
            chosen = _cover(combination, ranked, of, limit, minimum, room, kept)
            if chosen is None:
                continue
            # Every feasible cluster is chosen, or dropped by one of the reasons above.
            dropped = functools.partial(
                _left_out, ungrouped, ranked, of, number, what, limit, combination, chosen
            )
            return Selection(tuple(chosen), None, len(ranked) - len(chosen), dropped)
    bound = f"{need_groups}" if most_groups <= need_groups else f"{need_groups} to {most_groups}"
    needs = f"minClusters {minimum}"
    if room is not None:
        needs += f" and room for {room.replicas} replicas"
    return Selection(
        (),
        f"no {bound} {what} group(s) within maxClusters {limit} hold {needs}",
        unusable,
        ungrouped,
    )


def _ungrouped(ranked: Sequence[ClusterInfo], of: Sequence[int | None], what: str) -> Dropped:
    """The clusters of ``ranked`` without a group to spread by (``of``: their groups)."""
    why = f"no {what} to spread by"
    return tuple([(c.name, why) for c, g in zip(ranked, of, strict=True) if g is None])


def _left_out(
    ungrouped: Callable[[], Dropped],
    ranked: Sequence[ClusterInfo],
    of: Sequence[int | None],
    number: dict[str | None, int],
    what: str,
    limit: int,
    combination: tuple[int, ...],
    chosen: list[ClusterInfo],
) -> Dropped:
    """Why each cluster of ``ranked`` that a spread over ``combination`` did not choose
    was left out: no group, a group not used (one reason per group), or beyond
    maxClusters."""
    out = list(ungrouped())
    for value, g in number.items():
        if g not in combination:
            why = f"{what} {value} is not among the {len(combination)} group(s) used"
            out += [(c.name, why) for c, at in zip(ranked, of, strict=True) if at == g]
    picked = {c.name for c in chosen}
    why = f"beyond maxClusters {limit}"
    out += [
        (c.name, why)
        for c, g in zip(ranked, of, strict=True)
        if g in combination and c.name not in picked
    ]
    return tuple(out)


def _cover(
    combination: tuple[int, ...],
    ranked: Sequence[ClusterInfo],
    of: Sequence[int | None],
    limit: int,
    minimum: int,
    room: Room | None,
    kept: int,
) -> list[ClusterInfo] | None:
    """One cluster of each group of ``combination`` (its best), then the best ranked of
    the rest up to ``limit`` (Aggregated: only as many as hold the replicas, those it runs
    on first); None when that cannot meet ``minimum`` or hold the replicas. ``of``: the
    group number of each cluster of ``ranked``."""
    # The clusters of the groups, in rank order (made without a Python loop).
    members = list(itertools.compress(ranked, map(combination.__contains__, of)))
    if room is None or not room.fewest:
        if len(members) <= limit:
            chosen = members  # every one: the heads and all the rest
        else:  # the heads and the first of the rest, in rank order
            chosen, headed, free = [], set(), limit - len(combination)
            for c, g in zip(ranked, of, strict=True):
                if g not in combination:
                    continue
                if g not in headed:
                    headed.add(g)
                    chosen.append(c)
                elif free > 0:
                    free -= 1
                    chosen.append(c)
        if room is None or room.holds(chosen):
            return chosen if len(chosen) >= minimum else None
    assert room is not None
    heads: list[ClusterInfo] = []
    rest: list[ClusterInfo] = []
    headed = set()
    for c, g in zip(ranked, of, strict=True):
        if g not in combination:
            continue
        if g in headed:
            rest.append(c)  # in rank order
        else:
            headed.add(g)
            heads.append(c)
    free = limit - len(heads)
    if room.fewest:
        chosen = list(heads)
        running = {c.name for c in ranked[:kept]}
        # Where it runs first, then the roomiest: the fewest clusters added.
        for c in sorted(rest, key=lambda c: (c.name not in running, -room.cap_of(c))):
            if len(chosen) >= minimum and room.holds(chosen) and c.name not in running:
                break
            if len(chosen) - len(heads) >= free:
                break
            chosen.append(c)
    else:
        chosen = heads + room.largest(rest, free)
    if len(chosen) < minimum or not room.holds(chosen):
        return None
    picked = {c.name for c in chosen}
    return [c for c in ranked if c.name in picked]  # in rank order
