from __future__ import annotations

from decimal import Decimal

import pytest

from api.quantity import QuantityError, is_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", Decimal(1)),
        ("500m", Decimal("0.5")),
        ("0.5", Decimal("0.5")),
        ("2Gi", Decimal(2 * 1024**3)),
        ("1Ki", Decimal(1024)),
        ("1.5Mi", Decimal(int(1.5 * 1024**2))),
        ("1k", Decimal(1000)),
        ("3M", Decimal(3_000_000)),
        ("1e3", Decimal(1000)),
        ("1E-3", Decimal("0.001")),
        ("100n", Decimal("1E-7")),
        ("5u", Decimal("0.000005")),
        ("-1", Decimal(-1)),
        ("+2", Decimal(2)),
        (".5", Decimal("0.5")),
        ("1Ei", Decimal(1024**6)),
    ],
)
def test_parses_like_kubernetes(text: str, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


def test_compares_across_suffixes() -> None:
    assert parse_quantity("1000m") == parse_quantity("1")
    assert parse_quantity("1Gi") > parse_quantity("1G")
    assert parse_quantity("1024Mi") == parse_quantity("1Gi")


def test_rounds_up_below_a_nano_unit() -> None:
    assert parse_quantity("0.1n") == Decimal("1E-9")


def test_integers_are_accepted() -> None:
    assert parse_quantity(4) == Decimal(4)


@pytest.mark.parametrize(
    "text", ["", "abc", "1 Gi", " 1", "1gi", "1Kb", "1.2.3", "Gi", "1e", "--1"]
)
def test_rejects_what_kubernetes_rejects(text: str) -> None:
    assert not is_quantity(text)
    with pytest.raises(QuantityError, match="expected a number with an optional suffix"):
        parse_quantity(text)


def test_durations_in_seconds() -> None:
    from api.common import duration_seconds

    assert duration_seconds("1h30m") == 5400
    assert duration_seconds("500ms") == 0.5
    assert duration_seconds("1.5s") == 1.5
    with pytest.raises(ValueError, match="'soon' is not a duration such as 30s"):
        duration_seconds("soon")
