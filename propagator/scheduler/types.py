"""What the scheduler takes and gives: demand, context, verdicts and the decision."""

from __future__ import annotations

import functools
import operator
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from types import MappingProxyType
from typing import NamedTuple

from api.placement import Placement
from api.quantity import ARITHMETIC
from fleet.columns import exponent_of, integer_at
from fleet.snapshot import ClusterInfo

ResourceAmounts = Mapping[str, Decimal]


@dataclass(frozen=True)
class Demand:
    """What the workload needs: replicas, requests per replica, kinds it propagates."""

    replicas: int = 1
    per_replica: ResourceAmounts = field(default_factory=dict)
    """Requests of one replica, e.g. {"cpu": 0.5, "memory": 256Mi, "pods": 1}."""
    kinds: frozenset[tuple[str, str]] = frozenset()
    """(apiVersion, kind) of every object to propagate."""
    fixed: ResourceAmounts = field(default_factory=dict)
    """What the other pod-creating objects need on every cluster, whatever the replicas
    placed there (other workloads, Jobs, CronJobs, Pods)."""
    per_node: ResourceAmounts = field(default_factory=dict)
    """What DaemonSets need on each node of a cluster."""
    creates_pods: bool = True
    """False for configuration alone (nothing that creates pods): its one replica is the
    application itself, which asks a pod's room only of a cluster it is new on."""
    on: Mapping[str, Demand] = field(default_factory=dict)
    """What it asks instead on the clusters named, whose LimitRanges give containers
    that state no requests a default there (the member's admission fills them in, and
    its quota and scheduler count them). Its replicas are this demand's."""

    def beside_replicas(self, nodes: int) -> dict[str, Decimal]:
        """What a cluster of ``nodes`` ready nodes gives this application besides the
        divisible replicas."""
        out = dict(self.fixed)
        for resource, amount in self.per_node.items():
            out[resource] = add(out.get(resource, _ZERO), mul(amount, nodes))
        return out

    cpu: float = field(init=False, default=0.0)
    """per_replica cpu as a float, for scoring (capacity checks stay exact)."""
    memory: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cpu", float(self.per_replica.get("cpu", 0)))
        object.__setattr__(self, "memory", float(self.per_replica.get("memory", 0)))

    @functools.cached_property
    def exact_units(self) -> dict[str, tuple[int, int, int, int] | None]:
        """Per requested resource: (exponent, need per replica, exponent, fixed need),
        each need an exact integer in units of ``10**exponent``; None when a value is
        beyond what integer columns hold (computed once per demand)."""
        out: dict[str, tuple[int, int, int, int] | None] = {}
        for resource, need in self.per_replica.items():
            fixed = self.fixed.get(resource, _ZERO)
            need_exp, fixed_exp = exponent_of(need), exponent_of(fixed)
            if need_exp is None or fixed_exp is None:
                out[resource] = None
                continue
            need_int, fixed_int = integer_at(need, need_exp), integer_at(fixed, fixed_exp)
            if need_int is None or fixed_int is None:
                out[resource] = None
                continue
            out[resource] = (need_exp, need_int, fixed_exp, fixed_int)
        return out

    @functools.cached_property
    def resources_key(self) -> tuple[tuple[tuple[str, str], ...], ...]:
        """What the demand asks of a cluster besides the replica count, as a hashable
        value: per replica, fixed and per node. Amounts as written (``0.25`` and ``0.250``
        are told apart: explanations quote them)."""
        return tuple(
            tuple(sorted((r, str(v)) for r, v in amounts.items()))
            for amounts in (self.per_replica, self.fixed, self.per_node)
        )


@dataclass(eq=False, init=False)
class SchedulingContext:
    """Everything one decision reads besides the clusters themselves. Not changed once
    made (not frozen only because a frozen dataclass costs a fifth of a decision to make;
    its own ``__init__``: one Python call per decision instead of two)."""

    placement: Placement
    demand: Demand
    quota: Mapping[str, ResourceAmounts] | None = None
    """Remaining tenant quota per cluster (None: no quota applies)."""
    layer_rank: Mapping[str, int] = field(default_factory=dict)
    """Position of each layer in placement.layers (for the layer-order score)."""
    affinity_indexed: bool = False
    """True when the candidates came from indexes that already applied the placement's
    names, exclusions and selector exactly (so ClusterAffinity need not check again)."""
    current: Mapping[str, int] = field(default_factory=dict)
    """Where the application runs now: replicas per cluster (empty: nowhere yet)."""
    application: str = ""
    """The application's UID: ties between clusters hash on it, so that applications
    with equal scores spread over the fleet instead of filling the same clusters."""

    tolerations_key: tuple[tuple[str, str, str, str | None], ...] = field(init=False)
    """The placement's tolerations as a hashable value (equal tolerations, equal keys)."""

    def __init__(
        self,
        placement: Placement,
        demand: Demand,
        quota: Mapping[str, ResourceAmounts] | None = None,
        layer_rank: Mapping[str, int] | None = None,
        affinity_indexed: bool = False,
        current: Mapping[str, int] | None = None,
        application: str = "",
    ) -> None:
        self.placement = placement
        self.demand = demand
        self.quota = quota
        self.layer_rank = {} if layer_rank is None else layer_rank
        self.affinity_indexed = affinity_indexed
        self.current = {} if current is None else current
        self.application = application
        self.tolerations_key = tuple(
            [(t.key, t.operator, t.value, t.effect) for t in placement.tolerations]
        )

    def demand_on(self, cluster: str) -> Demand:
        """What the application asks of ``cluster`` (see :attr:`Demand.on`)."""
        demand = self.demand
        variant = demand.on.get(cluster) if demand.on else None
        if variant is None:
            return demand
        if variant.replicas != demand.replicas:
            variant = replace(variant, replicas=demand.replicas)
        return variant

    def quota_for(self, cluster: str) -> ResourceAmounts | None:
        return None if self.quota is None else self.quota.get(cluster, {})

    def tie_rank(self, cluster: str) -> int:
        """A stable rank of ``cluster`` for this application (lower wins a tie)."""
        return zlib.crc32(f"{self.application}/{cluster}".encode()) if self.application else 0

    def own_use(self, cluster: ClusterInfo) -> dict[str, Decimal]:
        """What the application itself uses on ``cluster`` (counted back as room): its
        current replicas and everything beside them, at today's demand."""
        replicas = self.current.get(cluster.name)
        if replicas is None:
            return {}
        demand = self.demand_on(cluster.name)
        out = demand.beside_replicas(cluster.nodes)
        for resource, amount in demand.per_replica.items():
            out[resource] = add(out.get(resource, _ZERO), mul(amount, replicas))
        return out

    def available(self, cluster: ClusterInfo) -> ResourceAmounts:
        """The cluster's available resources with the application's own use counted back."""
        own = self.own_use(cluster)
        if not own:
            return cluster.available
        return {r: add(v, own.get(r, _ZERO)) for r, v in cluster.available.items()}


# The exact arithmetic of quantities (see ``api.quantity.ARITHMETIC``), called as the
# context's own methods: entering a decimal context per cluster costs more than the sums.
add, sub, mul = ARITHMETIC.add, ARITHMETIC.subtract, ARITHMETIC.multiply
_ZERO = Decimal(0)


def left_after(available: ResourceAmounts, used: ResourceAmounts) -> dict[str, Decimal]:
    """``available`` minus ``used`` (resources ``available`` does not track stay untracked)."""
    if not used:
        return dict(available)
    return {r: sub(v, used.get(r, _ZERO)) for r, v in available.items()}


def replicas_that_fit(
    available: ResourceAmounts,
    per_replica: ResourceAmounts,
    beside: ResourceAmounts | None = None,
) -> int | None:
    """How many replicas fit in ``available`` once ``beside`` is taken from it (None: no
    resource is requested, no limit)."""
    fits: int | None = None
    for resource, need in per_replica.items():
        if need <= 0:
            continue
        have = available.get(resource)
        if have is None:
            continue  # not tracked there: no limit
        taken = beside.get(resource) if beside else None
        if taken is not None:
            have = sub(have, taken)
        n = _whole_times(have, need)
        fits = n if fits is None else min(fits, n)
    return fits


MAX_REPLICAS = 2**31 - 1
"""A workload's replica count is an int32 in Kubernetes: room for more is room for all."""


def _whole_times(have: Decimal, need: Decimal) -> int:
    """How many times ``need`` fits in ``have`` (at most :data:`MAX_REPLICAS`), for
    quantities of any size."""
    if have <= 0:
        return 0
    if have.adjusted() - need.adjusted() > 11:  # a quotient of 10**11 or more
        return MAX_REPLICAS
    return min(int(ARITHMETIC.divide_int(have, need)), MAX_REPLICAS)


def first_short(
    available: ResourceAmounts, per_replica: ResourceAmounts, replicas: int
) -> str | None:
    """The first resource of which ``replicas`` replicas need more than ``available``."""
    for resource, need in per_replica.items():
        have = available.get(resource)
        if have is not None and mul(need, replicas) > have:
            return resource
    return None


_NO_SCORES: Mapping[str, float] = MappingProxyType({})


class Verdict(NamedTuple):
    """Why a cluster was not chosen, or how it scored. (The scheduler's answers are named
    tuples: immutable like frozen dataclasses, and made several times faster, which counts
    when a decision makes a dozen of them.)"""

    cluster: str
    filtered_by: str | None = None
    reason: str | None = None
    """Short reason, e.g. "tainted not-ready", "insufficient cpu"."""
    detail: str | None = None
    scores: Mapping[str, float] = _NO_SCORES
    score: int | None = None
    selected: bool = False
    replicas: int | None = None


class Verdicts(Mapping[str, Verdict]):
    """Verdicts by cluster, made on first read (a decision's placement needs none)."""

    def __init__(self, make: Callable[[], dict[str, Verdict]]) -> None:
        self._make: Callable[[], dict[str, Verdict]] | None = make
        self._made: dict[str, Verdict] = {}

    def _all(self) -> dict[str, Verdict]:
        if self._make is not None:
            self._made, self._make = self._make(), None
        return self._made

    def __getitem__(self, name: str) -> Verdict:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


class Placed(NamedTuple):
    cluster: str
    layer: str
    replicas: int
    score: int


class LayerAttempt(NamedTuple):
    """One pass over a layer ("*" when the placement names no layers)."""

    layer: str
    candidates: int
    feasible: int
    outcome: str
    """"selected" or why this layer could not serve the placement."""


def _nothing_more() -> Mapping[str, Verdict]:
    return {}


class Decision(NamedTuple):
    """The scheduler's answer, with everything needed to explain it."""

    schedulable: bool
    placed: tuple[Placed, ...]
    layer: str | None
    summary: str
    """Short form for the Scheduled condition, e.g. "0/12 clusters fit: 7 tainted ..."."""
    evaluated: Mapping[str, Verdict]
    """Verdicts of the clusters the plugins looked at (the candidates)."""
    attempts: tuple[LayerAttempt, ...]
    full_scan: bool
    full_scan_reason: str | None
    snapshot_generation: int
    explain_rest: Callable[[], Mapping[str, Verdict]] = _nothing_more
    """Verdicts of the fleet members the indexes ruled out, computed only when asked:
    explaining them costs a pass over the whole fleet, which the fast path avoids."""
    timings: Mapping[str, float] = MappingProxyType({})
    """Seconds spent per stage: filter, score, select, assign (every layer tried)."""

    @property
    def verdicts(self) -> Mapping[str, Verdict]:
        """A verdict for every member of the fleet."""
        return {**self.explain_rest(), **self.evaluated}

    @property
    def clusters(self) -> list[str]:
        return [p.cluster for p in self.placed]


def spread_group(by_field: str | None, by_label: str | None) -> Callable[[ClusterInfo], str | None]:
    """How to read a cluster's spread group: a label's value or its region/zone/provider
    (None: the cluster has none)."""
    if by_label:
        return lambda cluster: cluster.labels.get(by_label)
    if by_field in ("region", "zone", "provider"):
        return operator.attrgetter(by_field)
    return lambda cluster: None
