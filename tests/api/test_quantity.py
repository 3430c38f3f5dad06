"""Quantities as apimachinery v0.37.2 reads, compares and writes them.

The expected values are Kubernetes' own answers (``hack/tools/k8s-semantics``);
``tests/e2e/semantics/test_k8s_semantics.py`` asks it about thousands of generated inputs too.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.quantity import (
    MAX_INT64,
    Format,
    QuantityError,
    arithmetic,
    format_quantity,
    parse,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "value", "fmt", "written"),
    [
        ("1", "1", "DecimalSI", "1"),
        ("500m", "0.5", "DecimalSI", "500m"),
        ("0.5", "0.5", "DecimalSI", "500m"),
        ("2Gi", str(2 * 1024**3), "BinarySI", "2Gi"),
        ("1.5Gi", str(1536 * 1024**2), "BinarySI", "1536Mi"),
        ("1024Ki", str(1024**2), "BinarySI", "1Mi"),
        ("0.5Ki", "512", "BinarySI", "512"),
        ("-1Ki", "-1024", "BinarySI", "-1Ki"),
        ("1G", "1000000000", "DecimalSI", "1G"),
        ("1.G", "1000000000", "DecimalSI", "1G"),
        ("1u", "0.000001", "DecimalSI", "1u"),
        ("1E", "1000000000000000000", "DecimalSI", "1E"),
        ("1500", "1500", "DecimalSI", "1500"),
        ("1e3", "1000", "DecimalExponent", "1e3"),
        ("1E+3", "1000", "DecimalExponent", "1e3"),
        ("1.5e3", "1500", "DecimalExponent", "1500"),
        ("1E-3", "0.001", "DecimalExponent", "1e-3"),
        ("100n", "0.0000001", "DecimalSI", "100n"),
        ("+2", "2", "DecimalSI", "2"),
        ("00100", "100", "DecimalSI", "100"),
        ("-0", "0", "DecimalSI", "0"),
        # JSON white space, accepted by the API server
        (" 1", "1", "DecimalSI", "1"),
        ("1 ", "1", "DecimalSI", "1"),
        ("\u00a02", "2", "DecimalSI", "2"),
        # no digits: zero
        (".", "0", "DecimalSI", "0"),
        ("-.", "0", "DecimalSI", "0"),
        ("-", "0", "DecimalSI", "0"),
        ("Ki", "0", "BinarySI", "0"),
        # huge values are exact (Kubernetes writes a DecimalSI value above 999E unsuffixed)
        ("1e51", "1" + "0" * 51, "DecimalExponent", "1e51"),
        ("1e60", "1" + "0" * 60, "DecimalExponent", "1e60"),
        ("1" + "0" * 53, "1" + "0" * 53, "DecimalSI", "100"),
        ("1000000E", "1" + "0" * 24, "DecimalSI", "1"),
        # binary values clamp at 2^63-1
        ("8Ei", str(MAX_INT64), "BinarySI", str(MAX_INT64)),
        ("9Ei", str(MAX_INT64), "BinarySI", str(MAX_INT64)),
        ("-9Ei", str(-MAX_INT64), "BinarySI", str(-MAX_INT64)),
        # below a nano-unit: away from zero
        ("0.1n", "0.000000001", "DecimalSI", "1n"),
        ("-3.001n", "-0.000000004", "DecimalSI", "-4n"),
        ("1e-10", "0.000000001", "DecimalExponent", "1e-9"),
        # exponents are int64 truncated to int32
        ("1e4294967296", "1", "DecimalExponent", "1"),
        ("1e-4294967297", "0.1", "DecimalExponent", "100e-3"),
    ],
)
def test_reads_and_writes_like_kubernetes(text: str, value: str, fmt: str, written: str) -> None:
    quantity = parse(text)
    assert quantity.value == Decimal(value)
    assert quantity.format == fmt
    assert str(quantity) == written


def test_json_numbers_read_as_their_text() -> None:
    assert parse(4) == parse("4")
    assert parse(0.5).value == Decimal("0.5")
    assert parse(1e51) == parse("1e+51")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "abc",
        "1 Gi",
        "1gi",
        "1Kb",
        "1K",
        "1.2.3",
        "1e",
        "1e+",
        "--1",
        "+-1",
        "0.1mi",
        "Pi",
        "Ei",
        "e-66",
        "1e9223372036854775808",
    ],
)
def test_refuses_what_kubernetes_refuses(text: str) -> None:
    with pytest.raises(QuantityError, match="expected a number with an optional suffix"):
        parse_quantity(text)


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}])
def test_refuses_what_is_not_a_string_or_number(value: object) -> None:
    with pytest.raises(QuantityError, match="is not a quantity"):
        parse(value)  # type: ignore[arg-type]


def test_compares_across_suffixes_and_sizes() -> None:
    assert parse_quantity("1000m") == parse_quantity("1")
    assert parse_quantity("1Gi") > parse_quantity("1G")
    assert parse_quantity("1e60") > parse_quantity("9Ei")
    assert parse_quantity("8Ei") == parse_quantity("9Ei")  # both clamped


def test_huge_exponents_stay_cheap() -> None:
    assert str(parse("1e2000000000")) == "100e1999999998"
    assert parse("1e-2000000000").value == Decimal("1e-9")
    assert parse("9" * 5000).value == Decimal("9" * 5000)


def test_arithmetic_on_huge_values_does_not_raise() -> None:
    with arithmetic():
        total = parse_quantity("1e2000000") + parse_quantity("1n")
    assert total > parse_quantity("1e1999999")
    with arithmetic():
        assert parse_quantity("1" + "0" * 53) + parse_quantity("1n") > parse_quantity("1e53")


@pytest.mark.parametrize(
    ("value", "fmt", "written"),
    [
        (Decimal(16), Format.DECIMAL_SI, "16"),
        (Decimal("7.25"), Format.DECIMAL_SI, "7250m"),
        (Decimal(64 * 1024**3), Format.BINARY_SI, "64Gi"),
        (Decimal(1000), Format.BINARY_SI, "1k"),
        (Decimal(1023), Format.BINARY_SI, "1023"),
        (Decimal("1536.5"), Format.BINARY_SI, "1536500m"),
        (Decimal("1E-9"), Format.DECIMAL_SI, "1n"),
        (Decimal(1000), Format.DECIMAL_SI, "1k"),
        (Decimal(10**15), Format.DECIMAL_SI, "1P"),
        (Decimal(1000), Format.DECIMAL_EXPONENT, "1e3"),
        (Decimal("0.01"), Format.DECIMAL_EXPONENT, "10e-3"),
        (Decimal(0), Format.BINARY_SI, "0"),
    ],
)
def test_canonical_strings(value: Decimal, fmt: Format, written: str) -> None:
    assert format_quantity(value, fmt) == written


def test_written_back_as_kubernetes_writes_it() -> None:
    assert str(parse("1000m")) == "1"
    assert str(parse("2048Ki")) == "2Mi"


_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
quantities = st.builds(
    lambda sign, whole, fraction, suffix: f"{sign}{whole}{fraction}{suffix}",
    st.sampled_from(["", "+", "-"]),
    st.integers(min_value=0, max_value=10**30).map(str),
    st.one_of(st.just(""), st.integers(min_value=0, max_value=10**12).map(lambda f: f".{f}")),
    st.one_of(st.sampled_from(_SUFFIXES), st.integers(-40, 40).map(lambda e: f"e{e}")),
)


LOSSLESS = Decimal("1e21")
"""Kubernetes writes DecimalSI values from 1000E up without a suffix (a value it cannot
read back); below that the written form is exact."""


@given(quantities)
def test_written_form_reads_back_as_the_same_value(text: str) -> None:
    quantity = parse(text)
    written = str(quantity)
    if abs(quantity.value) < LOSSLESS or quantity.format is Format.DECIMAL_EXPONENT:
        assert parse(written).value == quantity.value
    assert str(parse(written)) == written or abs(quantity.value) >= LOSSLESS


@given(quantities, quantities)
def test_ordering_survives_writing(a: str, b: str) -> None:
    x, y = parse(a), parse(b)
    if max(abs(x.value), abs(y.value)) < LOSSLESS:
        assert (x.value < y.value) == (parse(str(x)).value < parse(str(y)).value)
        assert (x.value == y.value) == (parse(str(x)).value == parse(str(y)).value)


def test_durations_in_seconds() -> None:
    from api.common import duration_seconds

    assert duration_seconds("1h30m") == 5400
    assert duration_seconds("500ms") == 0.5
    assert duration_seconds("1.5s") == 1.5
    with pytest.raises(ValueError, match="'soon' is not a duration such as 30s"):
        duration_seconds("soon")
