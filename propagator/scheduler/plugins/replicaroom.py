"""How many replicas each cluster has room for: per cluster, and for a whole candidate set
from the snapshot's columns (the arithmetic the Capacity filter and replica division
share)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from fleet.columns import Columns
from fleet.snapshot import ClusterInfo
from propagator.scheduler.plugins.protocol import Rejection
from propagator.scheduler.types import (
    MAX_REPLICAS,
    Demand,
    ResourceAmounts,
    SchedulingContext,
    first_short,
    left_after,
    replicas_that_fit,
)


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


def fit(
    cluster: ClusterInfo, available: ResourceAmounts, ctx: SchedulingContext, what: str
) -> Rejection | None:
    """Whether the application's demand on ``cluster`` fits in ``available`` (``what``:
    "capacity", or the tenant's "quota"): what runs beside its replicas, then as many
    replicas as must land there; None when it fits, else the first resource short."""
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
