"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1e3``) read, compared and written
exactly as ``k8s.io/apimachinery/pkg/api/resource`` does.

- Reading (``resource.ParseQuantity`` behind ``Quantity.UnmarshalJSON``): white space around
  the value is dropped, a sign and leading zeros are allowed, ``"."``, ``"-"`` and ``"-."``
  are 0, ``1.G`` is 1G, exponents are 64-bit integers truncated to 32 bits, values of any
  size are exact; anything finer than a nano-unit rounds away from zero (``-3.001n`` is
  ``-4n``); a binary-suffixed value above 2⁶³-1 is clamped to it (``9Ei``).
- The format (``DecimalSI``, ``BinarySI``, ``DecimalExponent``) comes from the suffix and
  decides the canonical string, as ``Quantity.String()`` writes it: ``1G``, ``1536Mi``,
  ``1500m``, ``1e3``, ``-4n``.

Values are exact ``Decimal`` numbers: comparisons are exact at every size. Arithmetic on
values of any size goes through :data:`ARITHMETIC` so that it never raises.
"""

from __future__ import annotations

import decimal
import functools
import re
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from decimal import ROUND_UP, Decimal
from enum import StrEnum
from typing import Any

ALLOWED = "a number with an optional suffix: n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or e<exponent>"

MAX_INT64 = 2**63 - 1

ARITHMETIC = decimal.Context(
    prec=120,
    rounding=decimal.ROUND_HALF_EVEN,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    traps=[decimal.DivisionByZero, decimal.InvalidOperation],
)
"""Exact for sums of quantities up to 10¹¹⁰ with nano-units, and never overflowing:
quantities Kubernetes accepts reach 10^(2³¹)."""


def arithmetic() -> AbstractContextManager[decimal.Context]:
    """Decimal arithmetic on quantities inside this block neither overflows nor loses the
    nano-units of values a member can hold. (The context manager itself, not a generator
    around it: the scheduler enters it for every cluster of every decision.)"""
    return decimal.localcontext(ARITHMETIC)


class QuantityError(ValueError):
    """A value that Kubernetes would not accept as a quantity."""


class Format(StrEnum):
    """How a quantity is written, chosen by the suffix it was read with."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


@dataclass(frozen=True)
class Quantity:
    """A quantity as Kubernetes holds it: its exact value and its format."""

    value: Decimal
    format: Format

    def __str__(self) -> str:
        return format_quantity(self.value, self.format)


_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}
_DECIMAL_SUFFIXES |= {"P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_OF_DECIMAL_EXPONENT = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_SUFFIX_OF_BINARY_EXPONENT = {e: s for s, e in _BINARY_SUFFIXES.items()}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
# Go's unicode.IsSpace, which strings.TrimSpace uses (Python's str.strip drops more).
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
_GO_SPACE += "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_GO_INT = re.compile(r"[+-]?[0-9]+")


def _wrap32(n: int) -> int:
    """``int32(n)`` in Go: the low 32 bits, signed."""
    return (n + 2**31) % 2**32 - 2**31


def _split(text: str) -> tuple[bool, bool, str, str, str]:
    """Sign, whether the number part holds a digit, digits before (leading zeros dropped)
    and after the point, and suffix, as ``parseQuantityString`` splits them."""
    positive, pos, end = True, 0, len(text)
    if text[0] in "+-":
        positive, pos = text[0] == "+", 1
    zeros = pos
    while pos < end and text[pos] == "0":
        pos += 1
    zeros = pos > zeros
    start = pos
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    whole, fraction = text[start:pos], ""
    if pos < end and text[pos] == ".":
        start = pos = pos + 1
        while pos < end and text[pos].isascii() and text[pos].isdigit():
            pos += 1
        fraction = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    if pos < end:
        unexpected = text[pos:]
        raise QuantityError(
            f"{text!r} is not a quantity: unexpected {unexpected!r}; expected {ALLOWED}"
        )
    return positive, zeros or bool(whole + fraction), whole, fraction, text[suffix_start:]


def _scale_of(text: str, suffix: str) -> tuple[int, int, Format]:
    """Base, exponent and format of a suffix (``quantitySuffixer.interpret``)."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], Format.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE" and _GO_INT.fullmatch(suffix[1:]):
        exponent = int(suffix[1:])
        if -(2**63) <= exponent < 2**63:  # strconv.ParseInt(…, 10, 64), then int32(…)
            return 10, _wrap32(exponent), Format.DECIMAL_EXPONENT
    raise QuantityError(f"{text!r} has an unknown suffix {suffix!r}: expected {ALLOWED}")


def parse(value: str | int | float) -> Quantity:
    """The quantity Kubernetes reads from ``value`` (a JSON string or number); raises
    :class:`QuantityError` naming what is allowed."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"{value!r} is not a quantity: expected {ALLOWED}")
    # A JSON number reaches the API server as its text; Python writes floats the same way.
    return _parse_text(repr(value) if isinstance(value, float) else str(value))


@functools.lru_cache(maxsize=4096)  # fleets repeat a few values ("8", "32Gi") thousands of times
def _parse_text(value: str) -> Quantity:
    text = value.strip(_GO_SPACE)
    if not text:
        raise QuantityError(f"{value!r} is not a quantity: expected {ALLOWED}")
    positive, has_digit, whole, fraction, suffix = _split(text)
    base, exponent, fmt = _scale_of(text, suffix)
    if not has_digit and not _zero_fits_int64(base, exponent):
        # Go reads such a number with inf.Dec, which wants a digit (".Pi", "e-66").
        raise QuantityError(f"{value!r} has no digits: expected {ALLOWED}")
    digits = whole + fraction or "0"  # a Decimal read from a string is exact
    if base == 2:
        exact = decimal.Context(prec=len(digits) + 25, Emax=decimal.MAX_EMAX)
        amount = exact.multiply(Decimal(f"{digits}E{-len(fraction)}"), Decimal(2**exponent))
    else:
        amount = Decimal(f"{digits}E{_wrap32(exponent - len(fraction))}")
    if amount.as_tuple().exponent < -9:  # type: ignore[operator]  # finite here
        amount = amount.quantize(Decimal("1e-9"), rounding=ROUND_UP, context=_exact_for(amount))
    if fmt is Format.BINARY_SI and amount > MAX_INT64:
        amount = Decimal(MAX_INT64)
    if fmt is Format.BINARY_SI and 0 < amount < 1:
        fmt = Format.DECIMAL_SI
    return Quantity(amount if positive or amount == 0 else amount.copy_negate(), fmt)


def _zero_fits_int64(base: int, exponent: int) -> bool:
    """Whether ``ParseQuantity`` reads a number part without digits (``""``, ``"."``)
    through its 64-bit path, which takes it as 0 (else inf.Dec refuses it)."""
    if base == 2:  # its precision estimate: 15 - 1 - exponent*3/10 - 1 >= 0 (up to Ti)
        return exponent * 3 // 10 <= 13
    return exponent >= -9


def _exact_for(amount: Decimal) -> decimal.Context:
    """A context with the precision to hold ``amount`` to nano-units without rounding."""
    return (
        ARITHMETIC.copy()
        if amount.adjusted() < 100
        else decimal.Context(
            prec=amount.adjusted() + 20, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN
        )
    )


def parse_quantity(value: str | int | float) -> Decimal:
    """The exact value of a quantity; raises :class:`QuantityError` naming what is allowed."""
    return parse(value).value


def parse_quantities(values: Mapping[str, Any] | None) -> dict[str, Decimal]:
    """The quantities of a resource list (``{"cpu": "500m", ...}``) that can be read;
    the others are left out (values a member or the hub computed, or not rendered yet)."""
    parsed = {}
    for key, value in (values or {}).items():
        try:
            parsed[key] = parse_quantity(value)
        except QuantityError:
            continue
    return parsed


def _coefficient(value: Decimal) -> tuple[str, int]:
    """``value`` as ``digits * 10^exponent`` with no factor of 10 left in ``digits``."""
    sign, digit_tuple, exponent = value.normalize(_exact_for(value)).as_tuple()
    return ("-" if sign else "") + "".join(map(str, digit_tuple)), int(exponent)


def format_quantity(value: Decimal, fmt: Format | str = Format.DECIMAL_SI) -> str:
    """The canonical string of a quantity of ``value`` in format ``fmt``, as Kubernetes'
    ``Quantity.String()`` writes it: ``8``, ``7800m``, ``32Gi``, ``1G``, ``1e3``.

    Like Kubernetes, a value beyond the largest suffix of its format (above 999E, or a
    multiple of 1024 Ei) is written without that suffix."""
    fmt = Format(fmt)
    if value == 0:
        return "0"
    if fmt is Format.BINARY_SI:
        whole = value.to_integral_value(rounding=ROUND_UP, context=_exact_for(value))
        if -1024 < value < 1024 or whole != value:
            fmt = Format.DECIMAL_SI
        else:
            amount, power = int(whole), 0
            while amount % 1024 == 0:
                amount, power = amount // 1024, power + 10
            return f"{amount}{_SUFFIX_OF_BINARY_EXPONENT.get(power, '')}"
    digits, exponent = _coefficient(value)
    shift = exponent % 3  # down to a multiple of three, as Go's AsCanonicalBytes does
    digits, exponent = digits + "0" * shift, exponent - shift
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{digits}e{exponent}" if exponent else str(digits)
    return f"{digits}{_SUFFIX_OF_DECIMAL_EXPONENT.get(exponent, '')}"
