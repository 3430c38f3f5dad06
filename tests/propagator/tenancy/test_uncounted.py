"""What a member's tenant quotas miss of their pods' use, and the limit held back (pure)."""

from __future__ import annotations

from decimal import Decimal

from propagator.tenancy.uncounted import held_back, uncounted

D = Decimal


def test_only_limited_resources_the_pods_use_beyond_the_count() -> None:
    limits = {"pods": D(6), "requests.cpu": D(2)}
    counted = {"a": {"pods": D(1), "requests.cpu": D("0.5")}, "b": {}, "c": {"pods": D(3)}}
    seen = {
        "a": {"pods": D(1), "cpu": D("0.5")},  # counted in full
        "b": {"pods": D(2), "cpu": D(1), "memory": D(1 << 30)},  # memory: not limited
        "c": {"pods": D(2)},  # counted more than runs (a pod just deleted): nothing missed
    }
    missed = uncounted(limits, counted, seen.get)
    assert missed == {"b": {"pods": D(2), "requests.cpu": D(1)}}
    assert held_back(limits, missed.values()) == {"pods": D(4), "requests.cpu": D(1)}


def test_a_namespace_whose_pods_are_not_known_yet_misses_nothing() -> None:
    assert uncounted({"pods": D(6)}, {"a": {}}, lambda ns: None) == {}
    assert held_back({"pods": D(6)}, []) == {"pods": D(6)}
