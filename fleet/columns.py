"""A fleet snapshot by columns: what the scheduler's built-in filters and scores read of
every cluster, laid out once per snapshot generation so a decision filters the whole
candidate set with a few set operations and scores it from flat arrays.

Clusters are numbered by name; a set of clusters is a Python int whose bit ``i`` stands
for the cluster at position ``i`` (a bitset: ``&``, ``|`` and ``~`` over thousands of
clusters cost a few machine words each). Readiness, layers, labels, taints and served
kinds are bitsets; free and available resources are tuples indexed by position.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterable, Iterator, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from api.selectors import LabelSelector, LabelSelectorRequirement
from api.taints import Taint

if TYPE_CHECKING:
    from fleet.snapshot import ClusterInfo

TaintKey = tuple[str, str, str]
"""(key, value, effect) of a taint."""

MEMO_ENTRIES = 1024
"""Keys a generation's columns keep plugin answers under (see :meth:`Columns.remember`)."""
MEMO_ANSWERS = 200_000
"""Per-cluster answers kept under all keys together (a few tens of MiB). Past either
bound the memo starts over: hostile variety costs time, not memory."""
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


def _bitset(positions: list[int], n: int) -> int:
    """The bitset of ``positions`` (built in one go: OR-ing bit by bit into a growing int
    would cost a copy of the int per position)."""
    raw = bytearray((n + 7) // 8)
    for i in positions:
        raw[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(raw, "little")


def _key(taint: Taint) -> TaintKey:
    return (taint.key, taint.value, taint.effect)


def _distinct(taints: Iterable[Taint]) -> bool:
    keys = [_key(t) for t in taints]
    return len(keys) == len(set(keys))


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
        self.infos: list[ClusterInfo] = [clusters[n] for n in self.names]
        self.position: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        n = len(self.names)
        self.all = (1 << n) - 1
        self.layers: list[str] = [c.layer for c in self.infos]
        self.free_cpu = [c.free_cpu for c in self.infos]
        self.free_memory = [c.free_memory for c in self.infos]
        self.total_cpu = [c.total_cpu for c in self.infos]
        self.total_memory = [c.total_memory for c in self.infos]
        ready: list[int] = []
        layers: dict[str, list[int]] = {}
        labels: dict[str, dict[str, list[int]]] = {}
        taints: dict[TaintKey, tuple[Taint, list[int]]] = {}
        serves: dict[tuple[str, str], list[int]] = {}
        self.taints_exact = True
        """False when a cluster carries one taint twice (then a count per distinct taint
        would differ from counting its taint list: the per-cluster path decides)."""
        self.available: dict[str, list[Decimal | None]] = {}
        """resource -> what each cluster has available (None: not tracked there)."""
        for i, c in enumerate(self.infos):
            if c.ready:
                ready.append(i)
            layers.setdefault(c.layer, []).append(i)
            for key, value in c.labels.items():
                labels.setdefault(key, {}).setdefault(value, []).append(i)
            if not _distinct(c.taints):
                self.taints_exact = False
            for taint in c.taints:
                taints.setdefault(_key(taint), (taint, []))[1].append(i)
            for kind in c.api_enablements:
                serves.setdefault(kind, []).append(i)
            for resource in c.available:
                self.available.setdefault(resource, [None] * n)
        for resource, column in self.available.items():
            for i, c in enumerate(self.infos):
                column[i] = c.available.get(resource)
        self.ready = _bitset(ready, n)
        self.in_layer: dict[str, int] = {k: _bitset(at, n) for k, at in layers.items()}
        """layer -> the clusters in it."""
        self.labels: dict[str, dict[str, int]] = {
            k: {v: _bitset(at, n) for v, at in values.items()} for k, values in labels.items()
        }
        """key -> value -> clusters carrying that label."""
        self.taints: dict[TaintKey, tuple[Taint, int]] = {
            k: (taint, _bitset(at, n)) for k, (taint, at) in taints.items()
        }
        """Each distinct taint, with the clusters carrying it."""
        self.serves: dict[tuple[str, str], int] = {k: _bitset(at, n) for k, at in serves.items()}
        self._scaled: dict[str, ScaledColumn | None] = {}
        self._memo: dict[Hashable, Any] = {}
        self._asked: set[Hashable] = set()
        self._answers = 0
        self._members: dict[int, tuple[tuple[int, ...], tuple[ClusterInfo, ...]]] = {}
        self._members_held = 0

    def updated(self, clusters: Mapping[str, ClusterInfo]) -> Columns:
        """The columns of ``clusters`` made from these: when the same clusters are there
        and few changed (the snapshot after one member's change), only theirs are
        redone; else built anew."""
        if len(clusters) != len(self.names) or any(n not in clusters for n in self.names):
            return Columns(clusters)
        changed = [i for i, name in enumerate(self.names) if clusters[name] is not self.infos[i]]
        if len(changed) > max(8, len(self.names) // 8):
            return Columns(clusters)
        new = copy.copy(self)
        new.infos = list(self.infos)
        new.layers = list(self.layers)
        for column in ("free_cpu", "free_memory", "total_cpu", "total_memory"):
            setattr(new, column, list(getattr(self, column)))
        new.labels = {k: dict(values) for k, values in self.labels.items()}
        new.in_layer = dict(self.in_layer)
        new.taints, new.serves = dict(self.taints), dict(self.serves)
        new.available = {r: list(column) for r, column in self.available.items()}
        new._scaled, new._memo, new._asked, new._answers = {}, {}, set(), 0
        new._members, new._members_held = {}, 0
        for i in changed:
            new._replace(i, self.infos[i], clusters[self.names[i]])
        new._carry_scaled(self, changed)
        return new

    def _replace(self, i: int, old: ClusterInfo, info: ClusterInfo) -> None:
        """Cluster ``i`` is ``info`` now (it was ``old``)."""
        bit = 1 << i
        self.infos[i], self.layers[i] = info, info.layer
        self.free_cpu[i], self.free_memory[i] = info.free_cpu, info.free_memory
        self.total_cpu[i], self.total_memory[i] = info.total_cpu, info.total_memory
        self.ready = self.ready | bit if info.ready else self.ready & ~bit
        self.in_layer[old.layer] &= ~bit
        self.in_layer[info.layer] = self.in_layer.get(info.layer, 0) | bit
        for key, value in old.labels.items():
            self.labels[key][value] &= ~bit
        for key, value in info.labels.items():
            values = self.labels.setdefault(key, {})
            values[value] = values.get(value, 0) | bit
        for taint in old.taints:
            first, bits = self.taints[_key(taint)]
            self.taints[_key(taint)] = (first, bits & ~bit)
        for taint in info.taints:
            first, bits = self.taints.get(_key(taint), (taint, 0))
            self.taints[_key(taint)] = (first, bits | bit)
        if not _distinct(info.taints):
            self.taints_exact = False
        for kind in old.api_enablements:
            self.serves[kind] &= ~bit
        for kind in info.api_enablements:
            self.serves[kind] = self.serves.get(kind, 0) | bit
        for resource in info.available:
            self.available.setdefault(resource, [None] * len(self.names))
        for resource, column in self.available.items():
            column[i] = info.available.get(resource)

    def _carry_scaled(self, before: Columns, changed: list[int]) -> None:
        """Keep the integer columns ``before`` had built, with the changed clusters' values
        redone (a column whose unit no longer holds a new value exactly is dropped: it is
        built again on first use)."""
        for resource, scaled in before._scaled.items():
            if scaled is None or len(scaled.values) != len(self.names):
                continue  # built anew on first use
            values = list(scaled.values)
            for i in changed:
                value = self.available[resource][i]
                values[i] = None if value is None else integer_at(value, scaled.exponent)
                if value is not None and values[i] is None:
                    break
            else:
                self._scaled[resource] = ScaledColumn(scaled.exponent, values)

    def scaled(self, resource: str) -> ScaledColumn | None:
        """The available ``resource`` of every cluster as exact integers in units of
        ``10**exponent`` (built on first use); None when a value is too large or too fine
        for that to be cheap (then the decimals are used as they are)."""
        if resource not in self._scaled:
            self._scaled[resource] = _scale(self.available.get(resource) or [])
        return self._scaled[resource]

    def recall(self, key: Hashable) -> Any:
        """What :meth:`remember` kept under ``key`` for this generation (None: nothing)."""
        return self._memo.get(key)

    def worth_keeping(self, key: Hashable) -> bool:
        """Whether answers under ``key`` should be kept: from the second time it is asked
        about in this generation (a one-off key costs no memory and no bookkeeping)."""
        if key in self._asked or key in self._memo:
            return True
        if len(self._asked) >= MEMO_ENTRIES:
            self._asked.clear()
        self._asked.add(key)
        return False

    def remember(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` under ``key`` while these columns are current. Only for answers
        that depend on nothing but the clusters and ``key``: a new generation has new
        columns, and with them an empty memo."""
        if len(self._memo) >= MEMO_ENTRIES and key not in self._memo:
            self._forget()
        self._memo[key] = value

    def answered(self, count: int) -> None:
        """``count`` more per-cluster answers are kept (under any key)."""
        self._answers += count
        if self._answers > MEMO_ANSWERS:
            self._forget()

    def _forget(self) -> None:
        self._memo.clear()
        self._answers = 0

    def bits(self, names: Iterable[str]) -> int:
        """The bitset of ``names`` (names not in the snapshot are left out)."""
        out = 0
        position = self.position
        for name in names:
            i = position.get(name)
            if i is not None:
                out |= 1 << i
        return out

    def members(self, bits: int) -> tuple[tuple[int, ...], tuple[ClusterInfo, ...]]:
        """The positions set in ``bits`` (lowest first) and their clusters. Kept for the
        sets asked about (decisions from one template end with the same survivors), at
        most :data:`MEMO_ENTRIES` sets and :data:`MEMO_ANSWERS` clusters in all (past
        either they start over)."""
        found = self._members.get(bits)
        if found is None:
            positions = tuple(self.each(bits))
            infos = self.infos
            found = (positions, tuple([infos[i] for i in positions]))
            self._members_held += len(positions)
            if len(self._members) >= MEMO_ENTRIES or self._members_held > MEMO_ANSWERS:
                self._members.clear()
                self._members_held = len(positions)
            self._members[bits] = found
        return found

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
