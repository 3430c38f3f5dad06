"""The layered scheduler: pre-filter by index, filter, score, select, assign replicas.

Pure: a decision reads an immutable fleet snapshot and makes no API call. Layers are tried
in order; the next one only when the current one cannot satisfy the placement. When the
snapshot is older than ``stale_after_s`` the scheduler scans the freshest cluster data it
is given instead of trusting the indexes, and goes back to the fast path only after the
snapshot has been fresh for ``fresh_for_s`` (so it does not flap).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple, cast

from api.placement import Placement, ReplicaWeights
from fleet.columns import Columns
from fleet.snapshot import ClusterInfo, FleetSnapshot
from propagator.scheduler.plugins import (
    Failed,
    FilterPlugin,
    columnar_capacity,
    replicas_capacity,
)
from propagator.scheduler.registry import Profile
from propagator.scheduler.replicas import apportion, rescale
from propagator.scheduler.select import Room, select
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
    clamped,
    judge,
    prefiltered,
    score_of,
    summary,
)


@dataclass
class _Pass:
    """The outcome of scheduling within one layer."""

    attempt: LayerAttempt
    placed: tuple[Placed, ...]
    verdicts: dict[str, Verdict]
    """Clusters dropped (by a filter, a weight or spread)."""
    reasons: Counter[str]
    ranked: Callable[[], dict[str, Verdict]] = dict
    """The verdicts of the clusters ranked and not dropped, made only when asked: most
    decisions are read for their placement alone."""


_Filter = tuple[
    FilterPlugin,
    Callable[[Columns, int, SchedulingContext], int | None] | None,
    Callable[[SchedulingContext], Hashable] | None,
]
"""A filter plugin, its columnar method and its memo key method (None: it has none)."""


class _MemoKeys(NamedTuple):
    """What one decision's answers are kept under (see ``Columns.remember``)."""

    filters: list[Hashable | None]
    """Per filter (None: not kept)."""
    scores: Hashable | None
    """The scores together (None: not kept)."""


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
        # (plugin, its columnar method, its memo key), looked up once (None: it has none)
        self._filters: list[_Filter] = [
            (
                f,
                getattr(f, "filter_columns", None) if columnar else None,
                getattr(f, "memo_key", None) if columnar else None,
            )
            for f in profile.filters
        ]
        self._scores = [
            (s, w, getattr(s, "score_columns", None) if columnar else None)
            for s, w in profile.scores
        ]
        keys = [getattr(s, "memo_key", None) if columnar else None for s, _ in profile.scores]
        # A score without one: every score is reckoned anew.
        self._score_keys: list[Callable[[SchedulingContext], Hashable]] = [
            k for k in keys if k is not None
        ]
        if len(self._score_keys) != len(keys):
            self._score_keys = []
        self._score_names = tuple((s.name, w) for s, w in profile.scores)
        self._score_plugin_names = [s.name for s, _ in profile.scores]
        self._filter_names = tuple(f.name for f in profile.filters)
        self._weight_sum = sum(w for _, w in profile.scores) or 1
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
        keys = self._memo_keys(ctx)
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
                layer_keys = self._memo_keys(layer_ctx)
            passes.append(
                self._pass(layer, candidates, cols, layer_ctx, layer_keys, timings, overflow)
            )
            placed = sum(p.replicas for q in passes for p in q.placed)
            if passes[-1].placed and (not overflow or placed >= wanted):
                break
        return self._decision(passes, snapshot, members, clusters, full_scan_reason, ctx, timings)

    def _memo_keys(self, ctx: SchedulingContext) -> _MemoKeys:
        """What each filter's answers, and the scores together, are kept under for this
        decision (None: not kept)."""
        filters = [key(ctx) if key is not None else None for _, _, key in self._filters]
        if not self._score_keys:
            return _MemoKeys(filters, None)
        scores = tuple([key(ctx) for key in self._score_keys])
        # None: a plugin's answers cannot be kept this time
        return _MemoKeys(filters, None if None in scores else ("score", self._score_names, scores))

    def _pass(
        self,
        layer: str | None,
        candidates: int,
        cols: Columns,
        ctx: SchedulingContext,
        keys: _MemoKeys,
        timings: dict[str, float],
        partial: bool,
    ) -> _Pass:
        """Filter, score, select and assign within one layer (each stage timed into
        ``timings``). With ``partial`` (layer overflow), the chosen clusters are filled as
        far as they go when they cannot hold every replica."""
        verdicts: dict[str, Verdict] = {}
        reasons: Counter[str] = Counter()
        t0 = time.perf_counter()
        feasible = self._filter(cols, candidates, ctx, keys.filters, verdicts, reasons)
        t1 = time.perf_counter()
        timings["filter"] = timings.get("filter", 0.0) + t1 - t0
        scored, parts = self._score(cols, feasible, ctx, keys.scores, verdicts, reasons)
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

    def _filter(
        self,
        cols: Columns,
        alive: int,
        ctx: SchedulingContext,
        keys: list[Hashable | None],
        verdicts: dict[str, Verdict],
        reasons: Counter[str],
    ) -> list[ClusterInfo]:
        """The clusters of ``alive`` every filter keeps; a verdict for each one dropped,
        from the first filter that drops it. A built-in judges the whole set from the
        columns; any other plugin (or a built-in that declines) runs per cluster. The
        filters up to the first without a memo key judge each cluster once per snapshot
        generation and keys (where the application runs: every time)."""
        memoised = next((n for n, key in enumerate(keys) if key is None), len(keys))
        memo = ("filters", self._filter_names[:memoised], tuple(keys[:memoised]))
        entry = cols.recall(memo) if memoised else None
        if entry is None and memoised and not cols.worth_keeping(memo):
            memoised = 0  # a one-off: judged as if it had no key
        dropped: list[tuple[int, Verdict]] = []
        if memoised:
            chain = self._filters[:memoised]
            mine = cols.bits(ctx.current) & alive if ctx.current else 0
            known, out, by_position = entry or (0, 0, {})
            by_position = cast(dict[int, Verdict], by_position)
            todo = alive & ~known & ~mine
            if todo:
                for i, verdict in self._judged_by(chain, cols, todo, ctx):
                    out |= 1 << i
                    by_position[i] = verdict
                cols.remember(memo, (known | todo, out, by_position))
            dropped = [(i, by_position[i]) for i in cols.each(out & alive & ~mine)]
            if mine:
                dropped += self._judged_by(chain, cols, mine, ctx)
                dropped.sort(key=lambda d: d[0])
            for i, _ in dropped:
                alive &= ~(1 << i)
        dropped += self._judged_by(self._filters[memoised:], cols, alive, ctx)
        for i, verdict in dropped:
            reasons[verdict.reason or ""] += 1
            verdicts[verdict.cluster] = verdict
            alive &= ~(1 << i)
        return [cols.infos[i] for i in cols.each(alive)]

    def _judged_by(
        self,
        filters: list[_Filter],
        cols: Columns,
        alive: int,
        ctx: SchedulingContext,
    ) -> list[tuple[int, Verdict]]:
        """(position, verdict) of each cluster of ``alive`` one of ``filters`` drops (the
        first that does), filter by filter."""
        out: list[tuple[int, Verdict]] = []
        for plugin, vector, _ in filters:
            if not alive:
                break
            for i, verdict in self._judged(plugin, vector, cols, alive, ctx):
                out.append((i, verdict))
                alive &= ~(1 << i)
        return out

    @staticmethod
    def _judged(
        plugin: FilterPlugin,
        vector: Callable[[Columns, int, SchedulingContext], int | None] | None,
        cols: Columns,
        alive: int,
        ctx: SchedulingContext,
    ) -> list[tuple[int, Verdict]]:
        """(position, verdict) of each cluster of ``alive`` the filter drops, lowest
        position first: the clusters the columns reject, each explained by the plugin's
        own check (which may overrule the columns); every cluster when there are none."""
        rejected = vector(cols, alive, ctx) if vector is not None else None
        if rejected == 0:
            return []
        out = []
        for i in cols.each(alive if rejected is None else rejected):
            verdict = judge(plugin, cols.infos[i], ctx)
            if verdict is not None:
                out.append((i, verdict))
        return out

    def _score(
        self,
        cols: Columns,
        feasible: list[ClusterInfo],
        ctx: SchedulingContext,
        key: Hashable | None,
        verdicts: dict[str, Verdict],
        reasons: Counter[str],
    ) -> tuple[list[tuple[float, str, ClusterInfo, int]], Callable[[int], dict[str, float]]]:
        """(negative weighted score, name, cluster, index) of the clusters that remain
        candidates, best first — where the application runs keeps its place, then the
        best score, ties by the application's hash — and the per-plugin scores of an
        index. Each score is clamped to 0-100; a score plugin that fails drops the
        cluster (with a verdict saying so)."""
        weights = ctx.placement.replicas.weights
        if ctx.placement.replicas.mode == "Divided" and weights is not None and weights.static:
            # A cluster without a static weight would get no replica: not a candidate.
            for cluster in [c for c in feasible if not static_weight(c, weights)]:
                feasible.remove(cluster)
                reasons["no static weight"] += 1
                verdicts[cluster.name] = Verdict(
                    cluster.name,
                    "ReplicaWeights",
                    "no static weight",
                    "no weights.static entry names or selects it",
                )
        positions = [cols.position[c.name] for c in feasible]
        if key is not None:
            negs, parts, failed = self._remembered_scores(cols, feasible, positions, ctx, key)
        else:
            negs, parts, failed = self._reckoned(cols, feasible, positions, ctx)
        scored = [
            (neg, cluster.name, cluster, j)
            for j, (cluster, neg) in enumerate(zip(feasible, negs, strict=True))
            if j not in failed
        ]
        for j in sorted(failed):
            verdict = failed[j]
            reasons[verdict.reason or ""] += 1
            verdicts[verdict.cluster] = verdict
        if ctx.current or ctx.application:
            current, tie_rank = ctx.current, ctx.tie_rank
            scored.sort(key=lambda s: (s[1] not in current, s[0], tie_rank(s[1]), s[1]))
        else:
            scored.sort()  # (score, name): names are unique, so nothing further is compared
        return scored, parts

    def _reckon(
        self,
        cols: Columns,
        feasible: list[ClusterInfo],
        positions: list[int],
        ctx: SchedulingContext,
    ) -> tuple[list[float], list[list[float]], dict[int, Verdict]]:
        """Per cluster of ``feasible`` (at ``positions``): its negative weighted score,
        each plugin's clamped scores (a list per plugin, by index), and the verdicts of
        the clusters a score plugin failed on (by index)."""
        totals = [0.0] * len(feasible)
        columns: list[list[float]] = []
        failed: dict[int, Verdict] = {}
        for scorer, weight, vector in self._scores:
            column: list[float] | None = vector(cols, positions, ctx) if vector else None
            if column is None:
                column = []
                for j, cluster in enumerate(feasible):
                    value = score_of(scorer, cluster, ctx)
                    if isinstance(value, Failed):
                        failed.setdefault(
                            j, Verdict(cluster.name, scorer.name, value.reason, value.detail)
                        )
                        value = 0.0
                    column.append(value)
            for j, value in enumerate(column):
                if not 0.0 <= value <= 100.0:
                    value = column[j] = clamped(value)
                totals[j] += value * weight
            columns.append(column)
        weight_sum = self._weight_sum
        return [-total / weight_sum for total in totals], columns, failed

    def _reckoned(
        self,
        cols: Columns,
        feasible: list[ClusterInfo],
        positions: list[int],
        ctx: SchedulingContext,
    ) -> tuple[list[float], Callable[[int], dict[str, float]], dict[int, Verdict]]:
        """:meth:`_reckon` with the per-plugin scores of an index as a function."""
        negs, columns, failed = self._reckon(cols, feasible, positions, ctx)
        names = self._score_plugin_names

        def parts(j: int) -> dict[str, float]:
            return {name: column[j] for name, column in zip(names, columns, strict=True)}

        return negs, parts, failed

    def _remembered_scores(
        self,
        cols: Columns,
        feasible: list[ClusterInfo],
        positions: list[int],
        ctx: SchedulingContext,
        memo: Hashable,
    ) -> tuple[list[float], Callable[[int], dict[str, float]], dict[int, Verdict]]:
        """:meth:`_reckoned`, each cluster's scores reckoned once per generation and
        ``memo`` (a failed score is reckoned again)."""
        known: dict[int, tuple[float, tuple[float, ...]]] | None = cols.recall(memo)
        if known is None:
            if not cols.worth_keeping(memo):
                return self._reckoned(cols, feasible, positions, ctx)
            known = {}
            cols.remember(memo, known)
        todo = [j for j, i in enumerate(positions) if i not in known]
        failed: dict[int, Verdict] = {}
        if todo:
            fresh, columns, failures = self._reckon(
                cols, [feasible[j] for j in todo], [positions[j] for j in todo], ctx
            )
            for t, j in enumerate(todo):
                if t in failures:
                    failed[j] = failures[t]
                else:
                    known[positions[j]] = (fresh[t], tuple([column[t] for column in columns]))
        names = self._score_plugin_names

        def parts(j: int) -> dict[str, float]:
            return dict(zip(names, known[positions[j]][1], strict=True))

        return [known[i][0] if i in known else 0.0 for i in positions], parts, failed

    def _choose(
        self,
        layer: str | None,
        candidates: int,
        cols: Columns,
        scored: list[tuple[float, str, ClusterInfo, int]],
        parts: Callable[[int], dict[str, float]],
        ctx: SchedulingContext,
        verdicts: dict[str, Verdict],
        reasons: Counter[str],
        timings: dict[str, float],
        partial: bool,
    ) -> _Pass:
        """Select among the ranked clusters and assign the replicas (each stage timed)."""
        t0 = time.perf_counter()
        feasible = [c for _, _, c, _ in scored]
        index = {name: (neg, j) for neg, name, _, j in scored}
        mode = ctx.placement.replicas.mode
        room = None
        if mode != "Duplicated":
            capacity = (
                columnar_capacity(cols, ctx)
                if self.columnar
                else lambda c: replicas_capacity(c, ctx)
            )
            room = Room(ctx.demand.replicas, capacity, fewest=mode == "Aggregated")
        kept = len(ctx.current.keys() & index.keys()) if ctx.current else 0
        selection = select(feasible, ctx.placement, room, kept)
        t1 = time.perf_counter()
        timings["select"] = timings.get("select", 0.0) + t1 - t0
        label = layer or ANY_LAYER
        placed: tuple[Placed, ...] = ()
        outcome = selection.problem
        if outcome is None:
            caps = {c.name: room.cap(c) for c in selection.chosen} if room else {}
            assignment = self._assign(selection.chosen, ctx, caps, partial)
            timings["assign"] = timings.get("assign", 0.0) + time.perf_counter() - t1
            if isinstance(assignment, str):
                outcome = assignment
            else:
                placed = tuple(
                    [
                        Placed(c.name, c.layer, assignment[c.name], round(-index[c.name][0]))
                        for c in selection.chosen
                        # Aggregated: a cluster left without replicas is not used.
                        if assignment[c.name] or mode != "Aggregated" or not ctx.demand.replicas
                    ]
                )
        partial_note = None
        if partial and placed:
            held = sum(p.replicas for p in placed)
            if held < ctx.demand.replicas:
                partial_note = f"held {held} of {ctx.demand.replicas} replicas, the rest overflow"
        if selection.dropped_count:
            reasons["spread"] += selection.dropped_count

        def ranked() -> dict[str, Verdict]:
            by_name = {p.cluster: p for p in placed}
            spread_out = selection.dropped()
            dropped = frozenset(verdicts) | {name for name, _ in spread_out}
            out = {}
            for name, why in spread_out:
                neg, j = index[name]
                out[name] = Verdict(name, "Spread", "spread", why, parts(j), round(-neg))
            for neg, name, _, j in scored:
                if name in dropped:
                    continue
                chosen = by_name.get(name)
                out[name] = Verdict(
                    name,
                    scores=parts(j),
                    score=round(-neg),
                    selected=chosen is not None,
                    replicas=chosen.replicas if chosen else None,
                    reason=None
                    if chosen
                    else "not selected"
                    if outcome is None
                    else "layer failed",
                    detail=None
                    if chosen
                    else "lower score than the chosen"
                    if outcome is None
                    else f"layer {label} could not serve the placement: {outcome}",
                )
            return out

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
        current = {c.name: ctx.current[c.name] for c in chosen if c.name in ctx.current}
        weights = mode.weights
        if mode.mode == "Aggregated" or (weights is not None and weights.dynamic):
            # By room: what each cluster can take beyond what it runs.
            shares = {
                n: replicas if cap is None else max(0, cap - current.get(n, 0))
                for n, cap in caps.items()
            }
        elif weights is None:
            shares = {c.name: 1 for c in chosen}
        else:
            shares = {c.name: static_weight(c, weights) for c in chosen}
        room = sum(cap if cap is not None else replicas for n, cap in caps.items() if shares.get(n))
        if partial and room < replicas:
            replicas = room  # overflow: the next layer takes the rest
        if current:
            division = rescale(replicas, shares, caps, current, ctx.tie_rank)
        else:
            division = apportion(replicas, shares, caps, ctx.tie_rank)
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

        def verdicts() -> dict[str, Verdict]:
            out: dict[str, Verdict] = {}
            for p in passes:
                out.update(p.verdicts)
                out.update(p.ranked())
            return out

        evaluated = Verdicts(verdicts)

        def explain_rest() -> dict[str, Verdict]:
            return {
                name: prefiltered(name, clusters.get(name), ctx)
                for name in sorted(members - evaluated.keys())
            }

        placed = final.placed
        if ctx.placement.overflow and ctx.placement.replicas.mode != "Duplicated":
            placed = tuple(p for q in passes for p in q.placed)
            if sum(p.replicas for p in placed) < ctx.demand.replicas:
                placed = ()  # the layers together cannot hold them: nothing moves
        schedulable = bool(placed)
        first = next((q.attempt.layer for q in passes if q.placed), None)
        return Decision(
            schedulable=schedulable,
            placed=placed,
            layer=first if schedulable else None,
            summary=summary(
                [(p.attempt, p.reasons) for p in passes],
                len(members),
                len(final.placed) if schedulable else None,
            ),
            evaluated=evaluated,
            attempts=tuple(p.attempt for p in passes),
            full_scan=full_scan_reason is not None,
            full_scan_reason=full_scan_reason,
            snapshot_generation=snapshot.generation,
            explain_rest=explain_rest,
            timings=timings,
        )


def static_weight(cluster: ClusterInfo, weights: ReplicaWeights) -> int:
    """The cluster's static weight: its own entry, else the first selector entry matching it,
    else 0."""
    for w in weights.static:
        if w.cluster == cluster.name:
            return w.weight
    for w in weights.static:
        if w.selector is not None and w.selector.matches(cluster.labels):
            return w.weight
    return 0
