"""Dividing replicas among clusters: Webster (Sainte-Laguë) seats by weight, never above a
cluster's cap, and steady rescaling from where the replicas run now.

**Fresh division** (:func:`apportion`) gives the seats one at a time, each to the cluster
whose next seat has the highest priority ``weight / (2 * seats + 1)`` (ties: the lower
tie rank), skipping clusters at their cap. Its result for ``n + 1`` replicas is its
result for ``n`` plus one seat, because each step only adds to the previous state — so no
cluster ever has fewer replicas when the total rises (house monotonicity), unlike
largest remainders (weights 1:3:3 give 1:1:1 at 3 and 0:2:2 at 4).

**Steady rescaling** (:func:`rescale`) starts from the replicas each cluster runs now
(trimmed to its cap): a scale-up shares out only the new replicas (by weight); a
scale-down takes replicas away in proportion to what each cluster runs; an unchanged total
changes nothing. Both are fresh divisions of the difference, so they are monotone in the
total as well.

Most divisions are settled at once by the natural divisor (:func:`_by_divisor`): each
cluster's weight times the total over the weights' sum, rounded; when those sum to the
total and exceed no cap, they are the one-at-a-time result. Otherwise, large
totals (an int32 ``replicas``) are given in bulk: every seat whose priority is above
a threshold at once, the few left one at a time, with exact rational arithmetic, so the
result is the one-at-a-time result. Smaller ones start from every seat above
``W / (2 total - m)`` (exact integers; ``m`` clusters of weights summing to ``W``), which
leaves at most ``m`` one at a time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from fractions import Fraction

TieRank = Callable[[str], int]
"""A stable rank per cluster for ties (lower wins; equal ranks fall back to the name).
None where a tie rank is asked for: ties go by name alone."""


def _seats_above(weight: int, threshold: Fraction) -> int:
    """How many seats of a cluster of ``weight`` have priority above ``threshold``:
    the k >= 0 with weight / (2k + 1) > threshold."""
    if weight <= 0:
        return 0
    ratio = weight / threshold  # 2k + 1 < ratio
    if ratio <= 1:
        return 0
    half = (ratio - 1) / 2
    return -((-half.numerator) // half.denominator)  # ceil


def _bulk(
    seats: dict[str, int],
    count: int,
    weights: Mapping[str, int],
    caps: Mapping[str, int | None],
) -> int:
    """Give, at once, every seat above a threshold as long as fewer than ``count``; returns
    how many were given. What is left is a few seats per cluster."""
    active = [n for n in seats if weights[n] > 0]
    if not active or count <= 8 * len(active) + 64:
        return 0

    def gained(n: str, threshold: Fraction) -> int:
        cap = caps.get(n)
        above = _seats_above(weights[n], threshold)
        return max(0, (above if cap is None else min(cap, above)) - seats[n])

    low, high = Fraction(0), Fraction(max(weights[n] for n in active))
    best = 0
    for _ in range(200):
        middle = (low + high) / 2
        given = sum(gained(n, middle) for n in active)
        if given <= count:
            high, best = middle, given
            if count - given <= 2 * len(active):
                break
        else:
            low = middle
    if best == 0:
        return 0
    for n in active:
        seats[n] += gained(n, high)
    return best


class _Priority:
    """A seat's priority ``weight / divisor``, exactly (cross-multiplied, no Fraction to
    build and normalise); higher priority sorts first."""

    __slots__ = ("divisor", "weight")

    def __init__(self, weight: int, divisor: int) -> None:
        self.weight, self.divisor = weight, divisor

    def __eq__(self, other: object) -> bool:
        assert isinstance(other, _Priority)
        return self.weight * other.divisor == other.weight * self.divisor

    def __lt__(self, other: _Priority) -> bool:
        return self.weight * other.divisor > other.weight * self.divisor

    __hash__ = None  # type: ignore[assignment]


def _key(weight: int, seats: int, rank: int, name: str) -> tuple[float, _Priority, int, str]:
    """The heap key of a cluster's next seat: its priority as a float first (rounding is
    monotone, so a smaller float is a higher priority), exactly when the floats tie, then
    the tie rank and the name."""
    divisor = 2 * seats + 1
    return (-weight / divisor, _Priority(weight, divisor), rank, name)


FLOAT_EXACT_BELOW = 2**50


def _add(
    seats: dict[str, int],
    count: int,
    weights: Mapping[str, int],
    caps: Mapping[str, int | None],
    tie: TieRank | None,
) -> int:
    """Give ``count`` more seats to ``seats`` (in place; its clusters are those of
    ``weights``), one at a time by priority; returns how many found no cluster below its
    cap."""
    count -= _bulk(seats, count, weights, caps)
    most = max(weights.values(), default=0)
    if most * (2 * (max(seats.values(), default=0) + count) + 1) < FLOAT_EXACT_BELOW:
        return _add_by_float(seats, count, weights, caps, tie)
    heap = [
        _key(weights[n], seats[n], tie(n) if tie else 0, n)
        for n in seats
        if weights[n] > 0 and (caps.get(n) is None or seats[n] < (caps[n] or 0))
    ]
    heapq.heapify(heap)
    while count > 0 and heap:
        *_, rank, n = heapq.heappop(heap)
        seats[n] += 1
        count -= 1
        cap = caps.get(n)
        if cap is None or seats[n] < cap:
            heapq.heappush(heap, _key(weights[n], seats[n], rank, n))
    return count


def _add_by_float(
    seats: dict[str, int],
    count: int,
    weights: Mapping[str, int],
    caps: Mapping[str, int | None],
    tie: TieRank | None,
) -> int:
    """:func:`_add` when every weight times every divisor stays below
    :data:`FLOAT_EXACT_BELOW`: two distinct priorities then differ by more than a float's
    rounding, so the float alone orders them exactly (and equal floats are equal
    priorities). The key is made inline: this runs for every Divided decision."""
    heap = [
        (-weights[n] / (2 * seats[n] + 1), tie(n) if tie else 0, n)
        for n in seats
        if weights[n] > 0 and (caps.get(n) is None or seats[n] < (caps[n] or 0))
    ]
    return _fill(heap, seats, count, weights, caps)


def _fill(
    heap: list[tuple[float, int, str]],
    seats: dict[str, int],
    count: int,
    weights: Mapping[str, int],
    caps: Mapping[str, int | None],
) -> int:
    """The one-at-a-time loop of :func:`_add_by_float` from ``heap``: each cluster below
    its cap with a positive weight, keyed by its next seat's priority as a float."""
    heapq.heapify(heap)
    while count > 0 and heap:
        _, rank, n = heap[0]
        given = seats[n] = seats[n] + 1
        count -= 1
        cap = caps.get(n)
        if cap is None or given < cap:
            heapq.heapreplace(heap, (-weights[n] / (2 * given + 1), rank, n))
        else:
            heapq.heappop(heap)
    return count


def _by_divisor(
    total: int, weights: Mapping[str, int], caps: Mapping[str, int | None]
) -> dict[str, int] | None:
    """The division at the natural divisor ``D = W / total`` (``W`` the weights' sum, all
    non-negative): each cluster gets ``k = w / D`` rounded (a half up). Every seat it
    gives has a priority ``w / (2j + 1)`` of at least ``D / 2`` and every seat it does not
    give one below; so when those seats number ``total`` and none is above a cap, they are
    the ``total`` highest, which is what one seat at a time gives (seats tied at the
    boundary are all given, or they would not number ``total``: neither the tie rank nor
    a cap can change it). None otherwise. Exact integers: ``k = (2 w total + W) // 2W``."""
    whole = sum(weights.values())
    if whole <= 0:
        return None
    double, twice = 2 * whole, 2 * total
    seats = {}
    given = 0
    for n, weight in weights.items():
        k = (twice * weight + whole) // double
        cap = caps.get(n)
        if cap is not None and k > cap:
            return None
        seats[n] = k
        given += k
    return seats if given == total else None


def apportion(
    total: int,
    weights: Mapping[str, int],
    caps: Mapping[str, int | None],
    tie: TieRank | None = None,
) -> dict[str, int] | None:
    """Split ``total`` replicas in proportion to ``weights`` (Webster), each cluster at most
    its cap (None: no cap). None when the caps cannot hold ``total``."""
    if min(weights.values(), default=0) >= 0:
        exact = _by_divisor(total, weights, caps)
        if exact is not None:
            return exact
        if (
            total <= 8 * len(weights) + 64
            and max(weights.values(), default=0) * (2 * total + 1) < FLOAT_EXACT_BELOW
        ):
            return _apportion_few(total, weights, caps, tie)
    seats = dict.fromkeys(weights, 0)
    return seats if _add(seats, total, weights, caps, tie) == 0 else None


def _apportion_few(
    total: int,
    weights: Mapping[str, int],
    caps: Mapping[str, int | None],
    tie: TieRank | None,
) -> dict[str, int] | None:
    """:func:`apportion` of a few seats per cluster, with float priorities (see
    :func:`_add_by_float`). Every seat whose priority is above ``W / (2 total - m)`` (``W``
    the weights' sum, ``m`` the clusters) is given at once: at most ``total`` of them, all
    among the first ``total`` one at a time would give (each is above every seat left
    out), and at least ``total - m``; the rest one at a time. Exact integers: seat ``k``
    (from 0) is above it when ``(2k + 1) W < w (2 total - m)``."""
    whole = sum(weights.values())
    spare, double = 2 * total - len(weights), 2 * whole
    seats = dict.fromkeys(weights, 0)
    heap: list[tuple[float, int, str]] = []
    for n, weight in weights.items():
        if weight <= 0:
            continue
        above = weight * spare - whole
        k = (above + double - 1) // double if above > 0 else 0  # seats 0 .. k-1 are above
        cap = caps.get(n)
        if cap is not None and k >= cap:
            seats[n] = cap if cap > 0 else 0  # full: no more seats
            continue
        if k:
            seats[n] = k
        heap.append((-weight / (2 * k + 1), tie(n) if tie else 0, n))
    left = total - sum(seats.values())
    return seats if _fill(heap, seats, left, weights, caps) == 0 else None


def rescale(
    total: int,
    weights: Mapping[str, int],
    caps: Mapping[str, int | None],
    current: Mapping[str, int],
    tie: TieRank | None = None,
) -> dict[str, int] | None:
    """``total`` replicas over the clusters of ``weights``, moving none that the change
    does not require: each keeps what it runs (``current``, at most its cap); new replicas
    are shared by weight; removed ones are taken in proportion to what each runs. None
    when the caps cannot hold ``total``."""
    kept = {n: _capped(current.get(n, 0), caps.get(n)) for n in weights}
    have = sum(kept.values())
    if have < total:
        left = {n: None if caps.get(n) is None else (caps[n] or 0) - kept[n] for n in kept}
        added = apportion(total - have, weights, left, tie)
        return None if added is None else {n: kept[n] + added[n] for n in kept}
    if have > total:
        taken = apportion(have - total, kept, dict(kept), tie)
        assert taken is not None  # the kept replicas hold what is taken
        return {n: kept[n] - taken[n] for n in kept}
    return kept


def _capped(value: int, cap: int | None) -> int:
    return max(0, value if cap is None else min(value, cap))
