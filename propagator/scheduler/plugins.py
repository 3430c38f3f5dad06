"""Scheduler plugins: the protocol, the built-in filters and scores.

A plugin has a ``name`` and a ``filter`` method (returns None to keep the cluster,
``(reason, detail)`` or :class:`Unschedulable` to drop it, :class:`Failed` when it could
not judge) and/or a ``score`` method (0 to 100; clamped). Plugins are found through the
entry point group ``propagator.scheduler.plugins`` (see ``registry.py``); the built-ins
below are registered there by this package's own pyproject.

The built-ins also judge a whole candidate set at once from the snapshot's columns
(``filter_columns``: the rejected clusters as a bitset; ``score_columns``: one score per
position), with results equal to their per-cluster methods; returning None from
``filter_columns`` hands the set to the per-cluster method.

A plugin may also say what its answers depend on besides the cluster: ``memo_key(ctx)``
returns a hashable value (None: nothing can be kept), and the scheduler keeps its answers
for each cluster under that key until the snapshot's next generation — applications made
from one template share tolerations, selectors and demand, so most decisions find the
built-ins' answers made. A filter's answer on a cluster where the application runs is
never kept (it counts the application's own use there).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol, runtime_checkable

from api.selectors import LabelSelector, selects
from api.taints import (
    FILTERING_EFFECTS,
    NOT_READY_TAINT,
    UNREACHABLE_TAINT,
    untolerated,
)
from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.types import (
    MAX_REPLICAS,
    Demand,
    ResourceAmounts,
    SchedulingContext,
    add,
    first_short,
    left_after,
    mul,
    replicas_that_fit,
    sub,
)

_ZERO = Decimal(0)
Rejection = tuple[str, str]
"""(short reason counted in summaries, detail for explanations)."""


@dataclass(frozen=True)
class Unschedulable:
    """The cluster cannot take the application (the same as returning a Rejection)."""

    reason: str
    detail: str


@dataclass(frozen=True)
class Failed:
    """The plugin could not judge the cluster (an error of its own, not of the cluster):
    the cluster is left out of this decision, and the decision says so."""

    reason: str
    detail: str


FilterResult = Rejection | Unschedulable | Failed | None


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> FilterResult:
        """None to keep ``cluster``; (reason, detail) or Unschedulable to drop it; Failed
        when it cannot tell."""


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        """How good ``cluster`` is for this placement, 0 to 100."""


_SHORT_TAINTS = {NOT_READY_TAINT: "not-ready", UNREACHABLE_TAINT: "unreachable"}


def taint_name(key: str) -> str:
    """How summaries name a taint: the controller's own by their short names."""
    return _SHORT_TAINTS.get(key, key)


def selector_key(selector: LabelSelector) -> Hashable:
    """A label selector as a hashable value (equal selectors, equal keys)."""
    labels = selector.match_labels
    return (
        tuple(sorted(labels.items())) if len(labels) > 1 else tuple(labels.items()),
        tuple([(r.key, r.operator, tuple(r.values)) for r in selector.match_expressions]),
    )


class TaintToleration:
    """Drops clusters with a taint the placement does not tolerate, and NotReady ones."""

    name = "TaintToleration"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        for taint in untolerated(cluster.taints, ctx.placement.tolerations):
            if taint.effect in FILTERING_EFFECTS:
                short = taint_name(taint.key)
                return (
                    f"tainted {short}",
                    f"taint {taint.key}={taint.value}:{taint.effect} not tolerated",
                )
        if not cluster.ready:
            return "not ready", "the cluster's Ready condition is not True"
        return None

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return ctx.tolerations_key

    def filter_columns(self, cols: Columns, alive: int, ctx: SchedulingContext) -> int | None:
        tolerations = ctx.placement.tolerations
        bad = cols.all & ~cols.ready
        for taint, bits in cols.taints.values():
            if (
                bits & alive
                and taint.effect in FILTERING_EFFECTS
                and not any(t.tolerates(taint) for t in tolerations)
            ):
                bad |= bits
        return alive & bad


class TaintPreference:
    """Favours clusters without PreferNoSchedule taints the placement does not tolerate
    (100 with none, 50 with one, 33 with two…), as kube-scheduler's TaintToleration
    score does for nodes."""

    name = "TaintPreference"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        avoided = [
            t
            for t in untolerated(cluster.taints, ctx.placement.tolerations)
            if t.effect == "PreferNoSchedule"
        ]
        return 100 / (1 + len(avoided))

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return ctx.tolerations_key

    def score_columns(
        self, cols: Columns, positions: Sequence[int], ctx: SchedulingContext
    ) -> list[float] | None:
        if not cols.taints_exact:
            return None  # a taint listed twice counts twice: per cluster
        counts = [0] * len(positions)
        tolerations = ctx.placement.tolerations
        for taint, bits in cols.taints.values():
            if taint.effect != "PreferNoSchedule" or any(t.tolerates(taint) for t in tolerations):
                continue
            for j, i in enumerate(positions):
                counts[j] += (bits >> i) & 1
        return [100 / (1 + n) for n in counts]


class ClusterAffinity:
    """Keeps the clusters that placement's selector, names and exclusions allow."""

    name = "ClusterAffinity"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        if ctx.affinity_indexed:
            return None
        p = ctx.placement
        if cluster.name in p.exclude_clusters:
            return "excluded", "listed in placement.excludeClusters"
        if p.cluster_names and cluster.name not in p.cluster_names:
            return "not in clusterNames", "not listed in placement.clusterNames"
        if p.cluster_selector is not None and not selects(p.cluster_selector, cluster.labels):
            return "selector mismatch", "labels do not match placement.clusterSelector"
        return None

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return "indexed" if ctx.affinity_indexed else None  # else: names differ per placement

    def filter_columns(self, cols: Columns, alive: int, ctx: SchedulingContext) -> int | None:
        if ctx.affinity_indexed:
            return 0
        p = ctx.placement
        allowed = cols.all & ~cols.bits(p.exclude_clusters)
        if p.cluster_names:
            allowed &= cols.bits(p.cluster_names)
        if p.cluster_selector is not None:
            allowed &= cols.selected(p.cluster_selector)
        return alive & ~allowed


class ApiEnablementFilter:
    """Keeps the clusters that serve every kind being propagated."""

    name = "ApiEnablement"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        missing = ctx.demand.kinds - cluster.api_enablements
        if missing:
            api_version, kind = sorted(missing)[0]
            return f"no {kind}", f"does not serve {kind} in {api_version}"
        return None

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return ctx.demand.kinds

    def filter_columns(self, cols: Columns, alive: int, ctx: SchedulingContext) -> int | None:
        serving = cols.all
        for kind in ctx.demand.kinds:
            serving &= cols.serves.get(kind, 0)
        return alive & ~serving


def _fit(
    cluster: ClusterInfo, available: ResourceAmounts, ctx: SchedulingContext, what: str
) -> Rejection | None:
    demand = ctx.demand_on(cluster.name)
    beside = demand.beside_replicas(cluster.nodes)
    short = first_short(available, beside, 1)
    if short is not None:
        return (
            f"insufficient {short}" if what == "capacity" else f"quota {short}",
            f"DaemonSets, Jobs, Pods and other workloads need {beside[short]} {short}; "
            f"{what} left: {available.get(short)}",
        )
    # Duplicated: every replica lands here; Divided and Aggregated: at least one must.
    need = demand.replicas if ctx.placement.replicas.mode == "Duplicated" else 1
    if need <= 0:
        return None
    available = left_after(available, beside)
    short = first_short(available, demand.per_replica, need)
    if short is None:
        return None
    have = available.get(short)
    return (
        f"insufficient {short}" if what == "capacity" else f"quota {short}",
        f"{need} replica(s) need {demand.per_replica[short] * need} {short}; {what} left: {have}",
    )


class Capacity:
    """Keeps the clusters with room: all replicas (Duplicated) or at least one (Divided,
    Aggregated). The application's own use there counts as room."""

    name = "Capacity"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        return _fit(cluster, ctx.available(cluster), ctx, "capacity")

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        if ctx.demand.on:
            return None  # some clusters' LimitRanges change what it asks there
        duplicated = ctx.placement.replicas.mode == "Duplicated"
        return ctx.demand.resources_key, ctx.demand.replicas if duplicated else 1

    def filter_columns(self, cols: Columns, alive: int, ctx: SchedulingContext) -> int | None:
        """The clusters without room, as ``_fit`` judges them, from the available columns
        (where the application runs, with its own use counted back as
        ``SchedulingContext.available`` counts it)."""
        demand = ctx.demand
        if demand.per_node or demand.on:
            return None  # what it asks depends on each cluster's nodes or LimitRanges
        beside = demand.fixed
        need = demand.replicas if ctx.placement.replicas.mode == "Duplicated" else 1
        # (resource, column, taken beside the replicas, what the replicas need) per check
        checks: list[tuple[str, list[Decimal | None], Decimal | None, Decimal]] = []
        for r, amount in beside.items():  # first_short(available, beside, 1)
            if (column := cols.available.get(r)) is not None:
                checks.append((r, column, None, amount))
        if need > 0:  # first_short(left_after(available, beside), per_replica, need)
            for r, amount in demand.per_replica.items():
                if (column := cols.available.get(r)) is not None:
                    checks.append((r, column, beside.get(r), mul(amount, need)))
        current = ctx.current
        mine = cols.bits(current) & alive if current else 0
        rejected = 0
        for i in cols.each(alive & ~mine):
            for _, column, taken, wanted in checks:
                have = column[i]
                if have is None:
                    continue
                if taken is not None:
                    have = sub(have, taken)
                if wanted > have:
                    rejected |= 1 << i
                    break
        per_replica = demand.per_replica
        for i in cols.each(mine):
            replicas = current[cols.names[i]]
            for r, column, taken, wanted in checks:
                have = column[i]
                if have is None:
                    continue
                own = beside.get(r, _ZERO)  # SchedulingContext.own_use
                if r in per_replica:
                    own = add(own, mul(per_replica[r], replicas))
                have = add(have, own)
                if taken is not None:
                    have = sub(have, taken)
                if wanted > have:
                    rejected |= 1 << i
                    break
        return rejected


class TenantQuotaFilter:
    """Keeps the clusters where the tenant's remaining quota fits the demand."""

    name = "TenantQuota"

    def filter(self, cluster: ClusterInfo, ctx: SchedulingContext) -> Rejection | None:
        remaining = ctx.quota_for(cluster.name)
        return None if remaining is None else _fit(cluster, remaining, ctx, "quota")

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return "no quota" if ctx.quota is None else None

    def filter_columns(self, cols: Columns, alive: int, ctx: SchedulingContext) -> int | None:
        return 0 if ctx.quota is None else None


def _least_allocated(cpu: float | None, memory: float | None) -> float:
    if cpu is None or memory is None:
        return 0.0 if cpu is None and memory is None else 100 * (cpu or memory or 0.0)
    return 50 * (cpu + memory)


class LeastAllocated:
    """Favours clusters with more of their cpu and memory free."""

    name = "LeastAllocated"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        return _least_allocated(cluster.free_cpu, cluster.free_memory)

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return ()

    def score_columns(
        self, cols: Columns, positions: Sequence[int], ctx: SchedulingContext
    ) -> list[float] | None:
        cpu, memory = cols.free_cpu, cols.free_memory
        return [_least_allocated(cpu[i], memory[i]) for i in positions]


def _balanced(
    cpu: float | None,
    memory: float | None,
    total_cpu: float,
    total_memory: float,
    demand: Demand,
) -> float:
    if cpu is None or memory is None:
        return 0.0
    # Fractions used once one replica more runs there.
    used_cpu = 1 - cpu + demand.cpu / total_cpu
    used_memory = 1 - memory + demand.memory / total_memory
    return 100 * (1 - abs(min(1.0, used_cpu) - min(1.0, used_memory)))


class BalancedAllocation:
    """Favours clusters whose cpu and memory would be used in equal proportion."""

    name = "BalancedAllocation"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        return _balanced(
            cluster.free_cpu,
            cluster.free_memory,
            cluster.total_cpu,
            cluster.total_memory,
            ctx.demand_on(cluster.name),
        )

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        if ctx.demand.on:
            return None  # some clusters' LimitRanges change what it asks there
        return ctx.demand.cpu, ctx.demand.memory

    def score_columns(
        self, cols: Columns, positions: Sequence[int], ctx: SchedulingContext
    ) -> list[float] | None:
        if ctx.demand.on:
            return None  # scored per cluster
        free_cpu, free_memory = cols.free_cpu, cols.free_memory
        total_cpu, total_memory = cols.total_cpu, cols.total_memory
        want_cpu, want_memory = ctx.demand.cpu, ctx.demand.memory
        out = []
        for i in positions:  # _balanced, inlined: this runs for every candidate
            cpu, memory = free_cpu[i], free_memory[i]
            if cpu is None or memory is None:
                out.append(0.0)
                continue
            used_cpu = 1 - cpu + want_cpu / total_cpu[i]
            used_memory = 1 - memory + want_memory / total_memory[i]
            used_cpu = used_cpu if used_cpu < 1.0 else 1.0
            used_memory = used_memory if used_memory < 1.0 else 1.0
            out.append(100 * (1 - abs(used_cpu - used_memory)))
        return out


class Preference:
    """Favours clusters matching placement.preferred selectors, by their weights."""

    name = "Preference"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        preferred = ctx.placement.preferred
        if not preferred:
            return 0.0
        total = sum(p.weight for p in preferred)
        got = sum(p.weight for p in preferred if p.selector.matches(cluster.labels))
        return 100 * got / total

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return tuple([(p.weight, selector_key(p.selector)) for p in ctx.placement.preferred])

    def score_columns(
        self, cols: Columns, positions: Sequence[int], ctx: SchedulingContext
    ) -> list[float] | None:
        preferred = ctx.placement.preferred
        if not preferred:
            return [0.0] * len(positions)
        total = sum(p.weight for p in preferred)
        got = [0] * len(positions)
        for term in preferred:
            bits = cols.selected(term.selector)
            for j, i in enumerate(positions):
                if (bits >> i) & 1:
                    got[j] += term.weight
        return [100 * g / total for g in got]


class LayerOrder:
    """Favours clusters in earlier layers of placement.layers."""

    name = "LayerOrder"

    def score(self, cluster: ClusterInfo, ctx: SchedulingContext) -> float:
        if not ctx.layer_rank:
            return 0.0
        rank = ctx.layer_rank.get(cluster.layer, len(ctx.layer_rank))
        return 100 * (1 - rank / len(ctx.layer_rank))

    def memo_key(self, ctx: SchedulingContext) -> Hashable:
        return tuple(ctx.layer_rank.items())

    def score_columns(
        self, cols: Columns, positions: Sequence[int], ctx: SchedulingContext
    ) -> list[float] | None:
        ranks = ctx.layer_rank
        if not ranks:
            return [0.0] * len(positions)
        layers, n = cols.layers, len(ranks)
        return [100 * (1 - ranks.get(layers[i], n) / n) for i in positions]


def replicas_capacity(cluster: ClusterInfo, ctx: SchedulingContext) -> int | None:
    """Replicas of this demand that fit the cluster (its own use there counted back) and
    the tenant's quota there."""
    demand = ctx.demand_on(cluster.name)
    beside = demand.beside_replicas(cluster.nodes) if demand.per_node else demand.fixed
    fits = replicas_that_fit(ctx.available(cluster), demand.per_replica, beside)
    remaining = ctx.quota_for(cluster.name)
    if remaining is not None:
        quota_fits = replicas_that_fit(remaining, demand.per_replica, beside)
        if quota_fits is not None:
            fits = quota_fits if fits is None else min(fits, quota_fits)
    return fits


def columnar_capacity(
    cols: Columns, ctx: SchedulingContext
) -> tuple[Callable[[ClusterInfo], int | None], dict[str, int | None] | None]:
    """:func:`replicas_capacity` as a function of the cluster, from the columns' exact
    integers when no tenant quota applies (else per cluster), and — where the application
    runs nowhere — the answers it already gave, by cluster name (None: none kept). The
    integers are prepared once per generation and demand, and each cluster where the
    application does not run is reckoned once per generation and demand, when first
    asked."""
    demand = ctx.demand
    if demand.per_node or demand.on or ctx.quota is not None:
        return (lambda cluster: replicas_capacity(cluster, ctx)), None
    memo = ("replicas capacity", demand.resources_key)
    kept: _KeptCapacity | None = cols.recall(memo)
    keeping = True
    if kept is None:
        plan = _integer_plan(cols, demand)
        known: dict[str, int | None] = {}
        keeping = cols.worth_keeping(memo)
        fresh = None if plan is None else _capacity(cols, plan, known, {}, keeping)
        kept = (plan, known, fresh)
        if keeping:
            cols.remember(memo, kept)
    plan, known, fresh = kept
    if plan is None or fresh is None:
        return (lambda cluster: replicas_capacity(cluster, ctx)), None
    if not ctx.current:
        return fresh, known  # made once per generation and demand
    return _capacity(cols, plan, known, ctx.current, keeping), None


_Plan = list[tuple[list[int | None], int, int]]
_KeptCapacity = tuple[
    _Plan | None, dict[str, int | None], Callable[[ClusterInfo], int | None] | None
]
"""What columnar_capacity keeps per generation and demand: the integer plan, the caps
of clusters where the application does not run, and the capacity where it runs nowhere."""


def _capacity(
    cols: Columns,
    plan: _Plan,
    known: dict[str, int | None],
    current: Mapping[str, int],
    keeping: bool,
) -> Callable[[ClusterInfo], int | None]:
    """The capacity of a cluster by ``plan``, ``current`` counted back; a cluster where
    the application does not run is reckoned once into ``known`` (with ``keeping``)."""
    position = cols.position

    def capacity(cluster: ClusterInfo) -> int | None:
        name = cluster.name
        i = position[name]
        running = current.get(name)
        if running is None and name in known:
            return known[name]
        fits: int | None = None
        for values, fixed, need in plan:
            have = values[i]
            if have is None:
                continue  # not tracked there: no limit
            # Its own use counts back (SchedulingContext.own_use): what runs beside the
            # replicas, which is the fixed need, and its replicas.
            left = have - fixed if running is None else have + need * running
            n = 0 if left <= 0 else left // need
            if n > MAX_REPLICAS:
                n = MAX_REPLICAS
            if fits is None or n < fits:
                fits = n
        if running is None and keeping:
            known[name] = fits
            cols.answered(1)
        return fits

    return capacity


def _integer_plan(cols: Columns, demand: Demand) -> _Plan | None:
    """Per requested resource some cluster tracks: (available, fixed need, need per
    replica) as integers in one unit; None when a value does not scale exactly."""
    plan = []
    units = demand.exact_units
    for resource, need in demand.per_replica.items():
        if need <= 0 or resource not in cols.available:
            continue
        column, exact = cols.scaled(resource), units.get(resource)
        if column is None or exact is None:
            return None
        need_exp, need_int, fixed_exp, fixed_int = exact
        unit = min(column.exponent, need_exp, fixed_exp)
        need_int *= 10 ** (need_exp - unit)
        fixed_int *= 10 ** (fixed_exp - unit)
        plan.append((column.at(unit), fixed_int, need_int))
    return plan
