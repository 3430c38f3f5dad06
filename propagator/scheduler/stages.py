"""The filter and score stages of a scheduling pass: each filter in order, then the
weighted scores, the built-ins over the candidate set at once from the snapshot's
columns, and the answers of plugins with a memo key kept per snapshot generation (see
``Columns.remember``)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple, cast

from api.placement import ReplicaWeights
from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.pluginregistry import Profile
from propagator.scheduler.plugins.protocol import (
    ColumnarFilter,
    ColumnarScore,
    Failed,
    FilterPlugin,
    Memoized,
)
from propagator.scheduler.types import SchedulingContext, Verdict
from propagator.scheduler.verdicts import clamped, judge, score_of

_Filter = tuple[
    FilterPlugin,
    Callable[[Columns, int, SchedulingContext], int | None] | None,
    Callable[[SchedulingContext], Hashable] | None,
]
"""A filter plugin, its columnar method and its memo key method (None: it has none)."""


class MemoKeys(NamedTuple):
    """What one decision's answers are kept under (see ``Columns.remember``)."""

    filters: list[Hashable | None]
    """Per filter (None: not kept)."""
    scores: Hashable | None
    """The scores together (None: not kept)."""


class Stages:
    """A profile's filters and scores, looked up once."""

    def __init__(self, profile: Profile, *, columnar: bool = True) -> None:
        """``columnar``: the built-ins judge each candidate set at once from the columns,
        and memo keys are used (False: every plugin per cluster, nothing kept)."""
        # (plugin, its columnar method, its memo key), looked up once (None: it has none)
        self._filters: list[_Filter] = [
            (
                f,
                f.filter_columns if columnar and isinstance(f, ColumnarFilter) else None,
                f.memo_key if columnar and isinstance(f, Memoized) else None,
            )
            for f in profile.filters
        ]
        self._scores = [
            (s, w, s.score_columns if columnar and isinstance(s, ColumnarScore) else None)
            for s, w in profile.scores
        ]
        keys = [
            s.memo_key if columnar and isinstance(s, Memoized) else None for s, _ in profile.scores
        ]
        # A score without one: every score is reckoned anew.
        self._score_keys: list[Callable[[SchedulingContext], Hashable]] = (
            [] if None in keys else cast(list[Callable[[SchedulingContext], Hashable]], keys)
        )
        self._score_names = tuple((s.name, w) for s, w in profile.scores)
        self._score_plugin_names = [s.name for s, _ in profile.scores]
        self._filter_names = tuple(f.name for f in profile.filters)
        self._weight_sum = sum(w for _, w in profile.scores) or 1

    def memo_keys(self, ctx: SchedulingContext) -> MemoKeys:
        """What each filter's answers, and the scores together, are kept under for this
        decision (None: not kept)."""
        filters = [key(ctx) if key is not None else None for _, _, key in self._filters]
        if not self._score_keys:
            return MemoKeys(filters, None)
        scores = tuple([key(ctx) for key in self._score_keys])
        # None: a plugin's answers cannot be kept this time
        return MemoKeys(filters, None if None in scores else ("score", self._score_names, scores))

    def filter(
        self,
        cols: Columns,
        alive: int,
        ctx: SchedulingContext,
        keys: list[Hashable | None],
        verdicts: dict[str, Verdict],
        reasons: dict[str, int],
    ) -> int:
        """The clusters of ``alive`` every filter keeps (a bitset of ``cols``); a verdict
        for each one dropped,
        from the first filter that drops it. A built-in judges the whole set from the
        columns; any other plugin (or a built-in that declines) runs per cluster. The
        filters up to the first without a memo key judge each cluster once per snapshot
        generation and keys (where the application runs: every time)."""
        memoised = keys.index(None) if None in keys else len(keys)
        if memoised:
            memo = ("filters", self._filter_names[:memoised], tuple(keys[:memoised]))
            entry = cols.recall(memo)
            if entry is None and not cols.worth_keeping(memo):
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
                cols.answered(todo.bit_count())
            bad = out & alive & ~mine
            dropped = [(i, by_position[i]) for i in cols.each(bad)] if bad else []
            if mine:
                dropped += self._judged_by(chain, cols, mine, ctx)
                dropped.sort(key=lambda d: d[0])
            for i, _ in dropped:
                alive &= ~(1 << i)
        dropped += self._judged_by(self._filters[memoised:], cols, alive, ctx)
        for i, verdict in dropped:
            reason = verdict.reason or ""
            reasons[reason] = reasons.get(reason, 0) + 1
            verdicts[verdict.cluster] = verdict
            alive &= ~(1 << i)
        return alive

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

    def score(
        self,
        cols: Columns,
        alive: int,
        ctx: SchedulingContext,
        key: Hashable | None,
        verdicts: dict[str, Verdict],
        reasons: dict[str, int],
    ) -> tuple[list[tuple[float, str, ClusterInfo, int]], Callable[[int], dict[str, float]]]:
        """(negative weighted score, name, cluster, index) of the clusters of ``alive``
        that remain candidates, best first — where the application runs keeps its place, then the
        best score, ties by the application's hash — and the per-plugin scores of an
        index. Each score is clamped to 0-100; a score plugin that fails drops the
        cluster (with a verdict saying so)."""
        positions, feasible = cols.members(alive)
        weights = ctx.placement.replicas.weights
        if ctx.placement.replicas.mode == "Divided" and weights is not None and weights.static:
            # A cluster without a static weight would get no replica: not a candidate.
            weighted = list(feasible)
            for cluster in [c for c in feasible if not static_weight(c, weights)]:
                weighted.remove(cluster)
                reasons["no static weight"] = reasons.get("no static weight", 0) + 1
                verdicts[cluster.name] = Verdict(
                    cluster.name,
                    "ReplicaWeights",
                    "no static weight",
                    "no weights.static entry names or selects it",
                )
            feasible = tuple(weighted)
            positions = tuple([cols.position[c.name] for c in feasible])
        if key is not None:
            negs, parts, failed = self._remembered_scores(cols, feasible, positions, ctx, key)
        else:
            negs, parts, failed = self._reckoned(cols, feasible, positions, ctx)
        if failed:
            scored = [
                (neg, cluster.name, cluster, j)
                for j, (cluster, neg) in enumerate(zip(feasible, negs, strict=True))
                if j not in failed
            ]
        else:  # made without a Python loop: this runs for every decision
            names = map(cols.names.__getitem__, positions)
            scored = list(zip(negs, names, feasible, range(len(feasible)), strict=True))
        for j in sorted(failed):
            verdict = failed[j]
            reason = verdict.reason or ""
            reasons[reason] = reasons.get(reason, 0) + 1
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
        feasible: Sequence[ClusterInfo],
        positions: Sequence[int],
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
        feasible: Sequence[ClusterInfo],
        positions: Sequence[int],
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
        feasible: Sequence[ClusterInfo],
        positions: Sequence[int],
        ctx: SchedulingContext,
        memo: Hashable,
    ) -> tuple[list[float], Callable[[int], dict[str, float]], dict[int, Verdict]]:
        """:meth:`_reckoned`, each cluster's scores reckoned once per generation and
        ``memo`` (a failed score is reckoned again)."""
        kept: tuple[dict[int, float], dict[int, tuple[float, ...]]] | None = cols.recall(memo)
        if kept is None:
            if not cols.worth_keeping(memo):
                return self._reckoned(cols, feasible, positions, ctx)
            kept = ({}, {})
            cols.remember(memo, kept)
        negs_of, parts_of = kept  # by position: the negative weighted score, each plugin's
        negs: list[float | None] = list(map(negs_of.get, positions))
        failed: dict[int, Verdict] = {}
        if None in negs:
            todo = [j for j, neg in enumerate(negs) if neg is None]
            fresh, columns, failures = self._reckon(
                cols, [feasible[j] for j in todo], [positions[j] for j in todo], ctx
            )
            for t, j in enumerate(todo):
                if t in failures:
                    failed[j], negs[j] = failures[t], 0.0
                else:
                    i = positions[j]
                    negs[j] = negs_of[i] = fresh[t]
                    parts_of[i] = tuple([column[t] for column in columns])
            cols.answered(len(todo))
        names = self._score_plugin_names

        def parts(j: int) -> dict[str, float]:
            return dict(zip(names, parts_of[positions[j]], strict=True))

        return cast(list[float], negs), parts, failed


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
