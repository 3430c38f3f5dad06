"""Choosing among feasible clusters (scheduler/select.py): the selection, its problem and
the reasons of the clusters left out equal a plain reading of the rules, on random ranked
clusters, spreads, cluster counts and room."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from api.placement import Placement
from fleet.snapshot import ClusterInfo
from propagator.scheduler.select import MAX_COMBINATIONS, Room, select
from tests.propagator.scheduler.test_scheduler import cluster


def reference(
    ranked: list[ClusterInfo],
    placement: Placement,
    caps: dict[str, int | None] | None,
    replicas: int,
    fewest: bool,
    kept: int,
) -> tuple[list[str], str | None, list[tuple[str, str]]]:
    """The rules as the scheduler's docs state them, for a spread placement: the fewest
    groups (best first) that serve, one head per group, then the best of the rest up to
    maxClusters (Aggregated: where it runs first, then the roomiest, only as many as hold
    the replicas); the roomiest of the rest when the best do not hold them."""
    spread = placement.spread
    assert spread is not None
    limit = placement.max_clusters or len(ranked)
    minimum = placement.min_clusters if placement.min_clusters is not None else 1

    def cap(c: ClusterInfo) -> float:
        value = caps[c.name] if caps is not None else None
        return float("inf") if value is None else value

    def holds(chosen: list[ClusterInfo]) -> bool:
        return caps is None or sum(cap(c) for c in chosen) >= replicas

    groups: dict[str, list[ClusterInfo]] = {}
    no_group = [c for c in ranked if c.region is None]
    for c in ranked:
        if c.region is not None:
            groups.setdefault(c.region, []).append(c)
    ungrouped = [(c.name, "no region to spread by") for c in no_group]
    need = spread.min_groups or 1
    most = min(spread.max_groups or len(groups), len(groups), limit)
    running = {c.name for c in ranked[:kept]}
    fewest_groups = min(max(need, len({c.region for c in ranked[:kept]} - {None})), most)
    if len(groups) < need:
        return [], f"only {len(groups)} region group(s) fit; minGroups is {need}", ungrouped
    if limit < need:
        return [], f"maxClusters {limit} cannot cover minGroups {need}", ungrouped
    values = list(groups)
    for k in range(fewest_groups, most + 1):
        for combination in itertools.islice(itertools.combinations(values, k), MAX_COMBINATIONS):
            heads = [groups[v][0] for v in combination]
            rest = [c for c in ranked if c.region in combination and c not in heads]
            free = limit - len(heads)
            if fewest:
                chosen = list(heads)
                for c in sorted(rest, key=lambda c: (c.name not in running, -cap(c))):
                    if len(chosen) >= minimum and holds(chosen) and c.name not in running:
                        break
                    if len(chosen) - len(heads) >= free:
                        break
                    chosen.append(c)
            else:
                chosen = heads + rest[:free]
                if not holds(chosen):
                    roomiest = sorted(rest, key=lambda c: (-cap(c), rest.index(c)))[:free]
                    chosen = heads + roomiest
            if len(chosen) < minimum or not holds(chosen):
                continue
            names = [c.name for c in ranked if c in chosen]
            out = list(ungrouped)
            for v in values:
                if v not in combination:
                    why = f"region {v} is not among the {len(combination)} group(s) used"
                    out += [(c.name, why) for c in groups[v]]
            out += [
                (c.name, f"beyond maxClusters {limit}")
                for c in ranked
                if c.region in combination and c.name not in names
            ]
            return names, None, out
    bound = f"{need}" if most <= need else f"{need} to {most}"
    needs = f"minClusters {minimum}" + (f" and room for {replicas} replicas" if caps else "")
    return [], f"no {bound} region group(s) within maxClusters {limit} hold {needs}", ungrouped


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_spread_selection_follows_the_rules(data: st.DataObject) -> None:
    count = data.draw(st.integers(1, 12))
    regions = [data.draw(st.sampled_from(["a", "b", "c", "d", None])) for _ in range(count)]
    ranked = [cluster(f"c{i:02d}", region=r) for i, r in enumerate(regions)]
    min_groups = data.draw(st.integers(1, 3))
    spread: dict[str, Any] = {"byField": "region", "minGroups": min_groups}
    if data.draw(st.booleans()):
        spread["maxGroups"] = data.draw(st.integers(min_groups, 4))
    spec: dict[str, Any] = {"spread": spread}
    if data.draw(st.booleans()):
        spec["maxClusters"] = data.draw(st.integers(1, 8))
    if data.draw(st.booleans()):
        spec["minClusters"] = data.draw(st.integers(1, spec.get("maxClusters", 8)))
    placement = Placement.model_validate(spec)
    with_room = data.draw(st.booleans())
    caps = {c.name: data.draw(st.none() | st.integers(0, 6)) for c in ranked} if with_room else None
    replicas = data.draw(st.integers(0, 20))
    fewest = with_room and data.draw(st.booleans())
    kept = data.draw(st.integers(0, count))
    room = (
        Room(replicas, lambda c: caps[c.name] if caps else None, fewest=fewest)
        if with_room
        else None
    )

    selection = select(ranked, placement, room, kept)

    names, problem, dropped = reference(ranked, placement, caps, replicas, fewest, kept)
    assert [c.name for c in selection.chosen] == names
    assert selection.problem == problem
    assert list(selection.dropped()) == dropped
    assert selection.dropped_count == len(dropped)
