"""A fleet snapshot by columns: what the scheduler's built-in filters and scores read of
every cluster, laid out once per snapshot generation so a decision filters the whole
candidate set with a few set operations and scores it from flat arrays.

Clusters are numbered by name; a set of clusters is a Python int whose bit ``i`` stands
for the cluster at position ``i`` (a bitset: ``&``, ``|`` and ``~`` over thousands of
clusters cost a few machine words each). Readiness, layers, labels, taints and served
kinds are bitsets; free and available resources are tuples indexed by position.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING

from api.selectors import LabelSelector, LabelSelectorRequirement
from api.taints import Taint

if TYPE_CHECKING:
    from fleet.snapshot import ClusterInfo

TaintKey = tuple[str, str, str]
"""(key, value, effect) of a taint."""

SCALE_LIMIT = 40
"""Decimal exponents beyond ±this are not turned into integers (10**40 is already more
than any cluster holds; such values take the exact decimal path)."""


class ScaledColumn:
    """Decimal values as integers times ``10**exponent`` (exactly; ``exponent`` <= 0)."""

    __slots__ = ("_finer", "exponent", "values")

    def __init__(self, exponent: int, values: list[int | None]) -> None:
        self.exponent = exponent
        self.values = values
        self._finer: dict[int, list[int | None]] = {}

    def at(self, exponent: int) -> list[int | None]:
        """The values in units of ``10**exponent`` (at most this column's exponent; each
        finer unit made once)."""
        if exponent == self.exponent:
            return self.values
        if exponent not in self._finer:
            factor = 10 ** (self.exponent - exponent)
            self._finer[exponent] = [None if v is None else v * factor for v in self.values]
        return self._finer[exponent]


def integer_at(value: Decimal, exponent: int) -> int | None:
    """``value`` as an integer in units of ``10**exponent`` (``exponent`` <= 0), None when
    that is not exact or not cheap (beyond the limits)."""
    if not value.is_finite() or value.adjusted() > SCALE_LIMIT:
        return None
    numerator, denominator = value.as_integer_ratio()
    whole, rest = divmod(numerator * 10**-exponent, denominator)
    return None if rest else whole


def exponent_of(value: Decimal) -> int | None:
    """The largest exponent <= 0 whose units hold ``value`` exactly (``-k`` for the fewest
    decimals ``k``), None when it is outside the limits."""
    if not value.is_finite() or value.adjusted() > SCALE_LIMIT:
        return None
    denominator = value.as_integer_ratio()[1]  # 2**a * 5**b: k = max(a, b)
    twos = (denominator & -denominator).bit_length() - 1
    fives, rest = 0, denominator >> twos
    while rest > 1:
        rest //= 5
        fives += 1
    k = max(twos, fives)
    return -k if k <= SCALE_LIMIT else None


def _scale(column: list[Decimal | None]) -> ScaledColumn | None:
    exponents = []
    for value in column:
        if value is not None:
            exp = exponent_of(value)
            if exp is None:
                return None
            exponents.append(exp)
    exponent = min(exponents, default=0)
    values: list[int | None] = []
    for value in column:
        values.append(None if value is None else integer_at(value, exponent))
    return ScaledColumn(exponent, values)


class Columns:
    """Clusters as columns (a snapshot builds them once, on first use)."""

    def __init__(self, clusters: Mapping[str, ClusterInfo]) -> None:
        self.names: tuple[str, ...] = tuple(sorted(clusters))
        self.infos: tuple[ClusterInfo, ...] = tuple(clusters[n] for n in self.names)
        self.position: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self.all = (1 << len(self.names)) - 1
        self.ready = 0
        self.layers: tuple[str, ...] = tuple(c.layer for c in self.infos)
        self.labels: dict[str, dict[str, int]] = {}
        """key -> value -> clusters carrying that label."""
        self.taints: dict[TaintKey, tuple[Taint, int]] = {}
        """Each distinct taint, with the clusters carrying it."""
        self.taints_exact = True
        """False when a cluster carries one taint twice (then a count per distinct taint
        would differ from counting its taint list: the per-cluster path decides)."""
        self.serves: dict[tuple[str, str], int] = {}
        self.free_cpu = tuple(c.free_cpu for c in self.infos)
        self.free_memory = tuple(c.free_memory for c in self.infos)
        self.total_cpu = tuple(c.total_cpu for c in self.infos)
        self.total_memory = tuple(c.total_memory for c in self.infos)
        self.available: dict[str, list[Decimal | None]] = {}
        """resource -> what each cluster has available (None: not tracked there)."""
        for i, c in enumerate(self.infos):
            bit = 1 << i
            if c.ready:
                self.ready |= bit
            for key, value in c.labels.items():
                values = self.labels.setdefault(key, {})
                values[value] = values.get(value, 0) | bit
            seen: set[TaintKey] = set()
            for taint in c.taints:
                key3 = (taint.key, taint.value, taint.effect)
                if key3 in seen:
                    self.taints_exact = False
                seen.add(key3)
                first, bits = self.taints.get(key3, (taint, 0))
                self.taints[key3] = (first, bits | bit)
            for kind in c.api_enablements:
                self.serves[kind] = self.serves.get(kind, 0) | bit
            for resource in c.available:
                self.available.setdefault(resource, [None] * len(self.names))
        for resource, column in self.available.items():
            for i, c in enumerate(self.infos):
                column[i] = c.available.get(resource)
        self._scaled: dict[str, ScaledColumn | None] = {}

    def scaled(self, resource: str) -> ScaledColumn | None:
        """The available ``resource`` of every cluster as exact integers in units of
        ``10**exponent`` (built on first use); None when a value is too large or too fine
        for that to be cheap (then the decimals are used as they are)."""
        if resource not in self._scaled:
            self._scaled[resource] = _scale(self.available.get(resource) or [])
        return self._scaled[resource]

    def bits(self, names: Iterable[str]) -> int:
        """The bitset of ``names`` (names not in the snapshot are left out)."""
        out = 0
        position = self.position
        for name in names:
            i = position.get(name)
            if i is not None:
                out |= 1 << i
        return out

    @staticmethod
    def each(bits: int) -> Iterator[int]:
        """The positions set in ``bits``, lowest first."""
        while bits:
            low = bits & -bits
            yield low.bit_length() - 1
            bits ^= low

    def with_label(self, key: str, value: str | None = None) -> int:
        values = self.labels.get(key)
        if not values:
            return 0
        if value is not None:
            return values.get(value, 0)
        out = 0
        for bits in values.values():
            out |= bits
        return out

    def requirement(self, req: LabelSelectorRequirement) -> int:
        """The clusters ``req`` matches (``LabelSelectorRequirement.matches``)."""
        op = req.operator
        if op == "In":
            out = 0
            for v in req.values:
                out |= self.with_label(req.key, v)
            return out
        if op == "NotIn":
            out = 0
            for v in req.values:
                out |= self.with_label(req.key, v)
            return self.all & ~out
        if op == "Exists":
            return self.with_label(req.key)
        if op == "DoesNotExist":
            return self.all & ~self.with_label(req.key)
        out = 0  # Gt, Lt: per distinct value of the key
        for value, bits in (self.labels.get(req.key) or {}).items():
            if req.matches({req.key: value}):
                out |= bits
        return out

    def selected(self, selector: LabelSelector) -> int:
        """The clusters ``selector`` matches."""
        out = self.all
        for key, value in selector.match_labels.items():
            out &= self.with_label(key, value)
        for req in selector.match_expressions:
            out &= self.requirement(req)
        return out
