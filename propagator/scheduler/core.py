"""The layered scheduler: pre-filter by index, filter, score (``stages.py``), select,
assign replicas.

Pure: a decision reads an immutable fleet snapshot and makes no API call. Layers are tried
in order; the next one only when the current one cannot satisfy the placement. When the
snapshot is older than ``stale_after_s`` the scheduler scans the freshest cluster data it
is given instead of trusting the indexes, and goes back to the fast path only after the
snapshot has been fresh for ``fresh_for_s`` (so it does not flap).
"""

from __future__ import annotations

import functools
import operator
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import cast

from api.placement import Placement
from fleet.columns import Columns
from fleet.snapshot import ClusterInfo, FleetSnapshot
from propagator.scheduler.pluginregistry import Profile
from propagator.scheduler.plugins import (
    columnar_capacity,
    replicas_capacity,
)
from propagator.scheduler.replicas import apportion, rescale
from propagator.scheduler.select import Room, select
from propagator.scheduler.stages import MemoKeys, Stages, static_weight
from propagator.scheduler.types import (
    Decision,
    Demand,
    LayerAttempt,
    Placed,
    ResourceAmounts,
    SchedulingContext,
    Verdict,
    Verdicts,
)
from propagator.scheduler.verdicts import (
    ANY_LAYER,
    ranked_verdicts,
    summary,
    unevaluated,
)


@dataclass
class _Pass:
    """The outcome of scheduling within one layer."""

    attempt: LayerAttempt
    placed: tuple[Placed, ...]
    verdicts: dict[str, Verdict]
    """Clusters dropped (by a filter, a weight or spread)."""
    reasons: dict[str, int]
    """How many clusters were dropped, by reason."""
    ranked: Callable[[], dict[str, Verdict]] = dict
    """The verdicts of the clusters ranked and not dropped, made only when asked: most
    decisions are read for their placement alone."""


_placed = functools.partial(tuple.__new__, Placed)
"""``Placed`` from a tuple of its fields, without the Python frame of ``Placed(...)``
(one per placed cluster of every decision)."""
_CLUSTER = operator.itemgetter(2)
"""The cluster of a scored entry (negative score, name, cluster, index)."""


def _evaluated(passes: list[_Pass]) -> dict[str, Verdict]:
    """The verdicts of every cluster the passes looked at."""
    out: dict[str, Verdict] = {}
    for p in passes:
        out.update(p.verdicts)
        out.update(p.ranked())
    return out


def _indexed_candidates(
    snapshot: FleetSnapshot, cols: Columns, fleet: str, layer: str | None, placement: Placement
) -> int:
    """Candidates from the indexes, as a bitset of ``cols``: the fleet, layer, names,
    exclusions and the selector's matchLabels and In/Exists expressions. The remaining
    rules are checked by the filter plugins."""
    candidates: int | None = cols.recall(("fleet", fleet))
    if candidates is None:
        candidates = cols.bits(snapshot.fleet(fleet))
        cols.remember(("fleet", fleet), candidates)
    if layer is not None:
        candidates &= cols.in_layer.get(layer, 0)
    if placement.cluster_names:
        candidates &= cols.bits(placement.cluster_names)
    selector = placement.cluster_selector
    if selector is not None:
        for key, value in selector.match_labels.items():
            candidates &= cols.with_label(key, value)
        for req in selector.match_expressions:
            if req.operator in ("In", "Exists"):
                candidates &= cols.requirement(req)
    if placement.exclude_clusters:
        candidates &= ~cols.bits(placement.exclude_clusters)
    return candidates


class Scheduler:
    """Makes placement decisions with one plugin profile; keeps the fast/full-scan mode."""

    def __init__(
        self,
        profile: Profile,
        *,
        stale_after_s: float = 30.0,
        fresh_for_s: float = 10.0,
        columnar: bool = True,
    ) -> None:
        """``columnar``: the built-in plugins judge each candidate set at once from the
        snapshot's columns (False: every plugin per cluster, the reference the columnar
        path is proven equal to)."""
        self.profile = profile
        self.columnar = columnar
        self._stages = Stages(profile, columnar=columnar)
        self.stale_after_s = stale_after_s
        self.fresh_for_s = fresh_for_s
        self.full_scans = 0
        self._fast = True
        self._fresh_since: float | None = None

    # -- the mode -------------------------------------------------------------------------

    def _use_full_scan(self, age_s: float, now: float) -> str | None:
        """Why this decision scans everything (None: the fast path), with hysteresis."""
        if age_s > self.stale_after_s:
            self._fast, self._fresh_since = False, None
            return f"snapshot is {age_s:.1f}s old (bound {self.stale_after_s:g}s)"
        if not self._fast:
            if self._fresh_since is None:
                self._fresh_since = now
            if now - self._fresh_since >= self.fresh_for_s:
                self._fast = True
            else:
                return (
                    f"snapshot fresh for {now - self._fresh_since:.1f}s of the "
                    f"{self.fresh_for_s:g}s needed to trust it again"
                )
        return None

    # -- one decision ---------------------------------------------------------------------

    def schedule(
        self,
        snapshot: FleetSnapshot,
        fleet: str,
        placement: Placement,
        demand: Demand,
        quota: Mapping[str, ResourceAmounts] | None = None,
        *,
        age_s: float | None = None,
        fresh_clusters: Callable[[], Iterable[ClusterInfo]] | None = None,
        explain: bool = False,
        now: float | None = None,
        current: Mapping[str, int] | None = None,
        application: str = "",
    ) -> Decision:
        """Place ``demand`` on the clusters of ``fleet``. ``age_s`` is how old the snapshot
        is (default: since it was built); ``fresh_clusters`` gives the freshest cluster data
        for a full scan (default: the snapshot's). With ``explain`` every member of the
        fleet gets a verdict, not only the candidates. ``current``: the replicas the
        application runs with per cluster now (its own use there counts as room, those
        clusters keep their place, rescaling starts from them); ``application``: its UID,
        which ties between clusters hash on."""
        now = time.monotonic() if now is None else now
        full_scan_reason = self._use_full_scan(snapshot.age_s(now) if age_s is None else age_s, now)
        members = snapshot.fleet(fleet)
        if full_scan_reason is not None:
            self.full_scans += 1
            source = fresh_clusters() if fresh_clusters else snapshot.clusters.values()
            clusters: Mapping[str, ClusterInfo] = {c.name: c for c in source if c.name in members}
            cols = Columns(clusters)
        else:
            clusters, cols = snapshot.clusters, snapshot.columns
        layers = placement.layers
        indexed = full_scan_reason is None and not explain
        selector = placement.cluster_selector
        ctx = SchedulingContext(
            placement,
            demand,
            quota,
            {layer: i for i, layer in enumerate(layers)},
            # The indexes apply names, exclusions, matchLabels, In and Exists exactly.
            affinity_indexed=indexed
            and (
                selector is None
                or all(r.operator in ("In", "Exists") for r in selector.match_expressions)
            ),
            current=current or {},
            application=application,
        )
        passes: list[_Pass] = []
        timings: dict[str, float] = {}
        keys = self._stages.memo_keys(ctx)
        tries: list[str | None] = [*layers] if layers else [None]
        overflow = placement.overflow and placement.replicas.mode != "Duplicated"
        wanted = demand.replicas
        for layer in tries:
            if not indexed:
                candidates = cols.bits(
                    n
                    for n in members
                    if n in clusters and (layer is None or clusters[n].layer == layer)
                )
            else:
                candidates = _indexed_candidates(snapshot, cols, fleet, layer, placement)
            layer_ctx, layer_keys = ctx, keys
            if overflow:  # what earlier layers could not hold
                left = wanted - sum(p.replicas for q in passes for p in q.placed)
                layer_ctx = replace(ctx, demand=replace(demand, replicas=left))
                layer_keys = self._stages.memo_keys(layer_ctx)
            passes.append(
                self._pass(layer, candidates, cols, layer_ctx, layer_keys, timings, overflow)
            )
            if passes[-1].placed and (
                not overflow or sum(p.replicas for q in passes for p in q.placed) >= wanted
            ):
                break
        return self._decision(passes, snapshot, members, clusters, full_scan_reason, ctx, timings)

    def _pass(
        self,
        layer: str | None,
        candidates: int,
        cols: Columns,
        ctx: SchedulingContext,
        keys: MemoKeys,
        timings: dict[str, float],
        partial: bool,
    ) -> _Pass:
        """Filter, score, select and assign within one layer (each stage timed into
        ``timings``). With ``partial`` (layer overflow), the chosen clusters are filled as
        far as they go when they cannot hold every replica."""
        verdicts: dict[str, Verdict] = {}
        reasons: dict[str, int] = {}
        t0 = time.perf_counter()
        survivors = self._stages.filter(cols, candidates, ctx, keys.filters, verdicts, reasons)
        t1 = time.perf_counter()
        timings["filter"] = timings.get("filter", 0.0) + t1 - t0
        scored, parts = self._stages.score(cols, survivors, ctx, keys.scores, verdicts, reasons)
        timings["score"] = timings.get("score", 0.0) + time.perf_counter() - t1
        return self._choose(
            layer,
            candidates.bit_count(),
            cols,
            scored,
            parts,
            ctx,
            verdicts,
            reasons,
            timings,
            partial,
        )

    def _choose(
        self,
        layer: str | None,
        candidates: int,
        cols: Columns,
        scored: list[tuple[float, str, ClusterInfo, int]],
        parts: Callable[[int], dict[str, float]],
        ctx: SchedulingContext,
        verdicts: dict[str, Verdict],
        reasons: dict[str, int],
        timings: dict[str, float],
        partial: bool,
    ) -> _Pass:
        """Select among the ranked clusters and assign the replicas (each stage timed)."""
        t0 = time.perf_counter()
        feasible = list(map(_CLUSTER, scored))
        mode = ctx.placement.replicas.mode
        room = None
        if mode != "Duplicated":
            capacity, known = (
                columnar_capacity(cols, ctx)
                if self.columnar
                else ((lambda c: replicas_capacity(c, ctx)), None)
            )
            room = Room(ctx.demand.replicas, capacity, mode == "Aggregated", known)
        current = ctx.current
        kept = sum(1 for c in feasible if c.name in current) if current else 0
        selection = select(feasible, ctx.placement, room, kept)
        t1 = time.perf_counter()
        timings["select"] = timings.get("select", 0.0) + t1 - t0
        label = layer or ANY_LAYER
        placed: tuple[Placed, ...] = ()
        outcome = selection.problem
        if outcome is None:
            caps = room.caps_of(selection.chosen) if room else {}
            assignment = self._assign(selection.chosen, ctx, caps, partial)
            timings["assign"] = timings.get("assign", 0.0) + time.perf_counter() - t1
            if isinstance(assignment, str):
                outcome = assignment
            else:
                # The chosen are in rank order, as scored is; Aggregated: a cluster left
                # without replicas is not used.
                used_all = mode != "Aggregated" or not ctx.demand.replicas
                placed = tuple(
                    [
                        _placed((name, c.layer, assignment[name], round(-neg)))
                        for neg, name, c, _ in scored
                        if name in assignment and (used_all or assignment[name])
                    ]
                )
        partial_note = None
        if partial and placed:
            held = sum(p.replicas for p in placed)
            if held < ctx.demand.replicas:
                partial_note = f"held {held} of {ctx.demand.replicas} replicas, the rest overflow"
        if selection.dropped_count:
            reasons["spread"] = reasons.get("spread", 0) + selection.dropped_count

        ranked = functools.partial(
            ranked_verdicts, scored, parts, placed, selection, verdicts, outcome, label
        )
        attempt = LayerAttempt(
            label, candidates, len(feasible), outcome or partial_note or "selected"
        )
        return _Pass(attempt, placed, verdicts, reasons, ranked)

    def _assign(
        self,
        chosen: tuple[ClusterInfo, ...],
        ctx: SchedulingContext,
        caps: Mapping[str, int | None],
        partial: bool = False,
    ) -> dict[str, int] | str:
        """Replicas per chosen cluster, or why they cannot be assigned. Shared replicas
        are divided afresh where the application runs nowhere yet, else rescaled from
        where it runs (see ``replicas.py``); with ``partial``, as many as fit."""
        mode = ctx.placement.replicas
        replicas = ctx.demand.replicas
        if mode.mode == "Duplicated":
            return {c.name: replicas for c in chosen}
        running = ctx.current
        current = {c.name: running[c.name] for c in chosen if c.name in running} if running else {}
        weights = mode.weights
        by_room = mode.mode == "Aggregated" or (weights is not None and weights.dynamic)
        shares: Mapping[str, int]
        if by_room and not current and None not in caps.values():
            # By room, where it runs nowhere yet: each cluster's share is its room.
            shares = cast(Mapping[str, int], caps)  # None is not among them
            room = sum(shares.values())
        else:
            if by_room:  # what each cluster can take beyond what it runs
                shares = {
                    n: replicas if cap is None else max(0, cap - current.get(n, 0))
                    for n, cap in caps.items()
                }
            elif weights is None:
                shares = {c.name: 1 for c in chosen}
            else:
                shares = {c.name: static_weight(c, weights) for c in chosen}
            room = sum(
                cap if cap is not None else replicas for n, cap in caps.items() if shares.get(n)
            )
        if partial and room < replicas:
            replicas = room  # overflow: the next layer takes the rest
        tie = ctx.tie_rank if ctx.application else None
        if current:
            division = rescale(replicas, shares, caps, current, tie)
        else:
            division = apportion(replicas, shares, caps, tie)
        if division is None:
            return f"{replicas} replicas do not fit: room for {room} in the chosen clusters"
        return division

    def _decision(
        self,
        passes: list[_Pass],
        snapshot: FleetSnapshot,
        members: frozenset[str],
        clusters: Mapping[str, ClusterInfo],
        full_scan_reason: str | None,
        ctx: SchedulingContext,
        timings: dict[str, float],
    ) -> Decision:
        final = passes[-1]

        evaluated = Verdicts(functools.partial(_evaluated, passes))
        explain_rest = functools.partial(unevaluated, members, clusters, ctx, evaluated)

        placed = final.placed
        if ctx.placement.overflow and ctx.placement.replicas.mode != "Duplicated":
            placed = tuple(p for q in passes for p in q.placed)
            if sum(p.replicas for p in placed) < ctx.demand.replicas:
                placed = ()  # the layers together cannot hold them: nothing moves
        schedulable = bool(placed)
        first = None
        if schedulable:
            first = next(q.attempt.layer for q in passes if q.placed)
        return Decision(
            schedulable=schedulable,
            placed=placed,
            layer=first,
            summary=summary(
                [(p.attempt, p.reasons) for p in passes],
                len(members),
                len(final.placed) if schedulable else None,
            ),
            evaluated=evaluated,
            attempts=tuple([p.attempt for p in passes]),
            full_scan=full_scan_reason is not None,
            full_scan_reason=full_scan_reason,
            snapshot_generation=snapshot.generation,
            explain_rest=explain_rest,
            timings=timings,
        )
