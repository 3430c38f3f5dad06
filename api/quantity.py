"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1e3``), parsed and compared exactly.

Follows ``k8s.io/apimachinery/pkg/api/resource``: binary suffixes (Ki … Ei), decimal
suffixes (n u m "" k M G T P E) and decimal exponents (``1e3``, ``1E-3``). Values are exact
``Decimal`` numbers; like Kubernetes, anything finer than a nano-unit rounds up.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Context, Decimal, InvalidOperation

_CTX = Context(prec=60)
_NANO = Decimal("1e-9")
_PATTERN = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
ALLOWED = "a number with an optional suffix: n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or e<exponent>"


class QuantityError(ValueError):
    """A string that Kubernetes would not accept as a quantity."""


def parse_quantity(value: str | int | float) -> Decimal:
    """The exact value of a quantity; raises :class:`QuantityError` naming what is allowed."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity: expected {ALLOWED}")
    if isinstance(value, int | float):
        value = repr(value) if isinstance(value, float) else str(value)
    match = _PATTERN.match(value.strip()) if value == value.strip() else None
    if not match:
        raise QuantityError(f"{value!r} is not a quantity: expected {ALLOWED}")
    number_text, suffix = match.groups()
    try:
        number = Decimal(number_text)
    except InvalidOperation as exc:  # pragma: no cover - the pattern admits only digits
        raise QuantityError(f"{value!r} is not a quantity: expected {ALLOWED}") from exc
    if suffix in _BINARY:
        result = _CTX.multiply(number, Decimal(1024) ** _BINARY[suffix])
    elif suffix in _DECIMAL:
        result = _CTX.multiply(number, Decimal(10) ** _DECIMAL[suffix])
    elif exp := _EXPONENT.match(suffix):
        result = _CTX.multiply(number, _CTX.power(Decimal(10), int(exp.group(1))))
    else:
        raise QuantityError(f"{value!r} has an unknown suffix {suffix!r}: expected {ALLOWED}")
    return result.quantize(_NANO, rounding=ROUND_CEILING, context=_CTX)


def is_quantity(value: str) -> bool:
    """True when ``value`` parses as a Kubernetes quantity."""
    try:
        parse_quantity(value)
    except QuantityError:
        return False
    return True


_BINARY_SUFFIXES = (("Ei", 6), ("Pi", 5), ("Ti", 4), ("Gi", 3), ("Mi", 2), ("Ki", 1))


def format_quantity(value: Decimal, *, binary: bool = False) -> str:
    """A canonical quantity string: ``8``, ``7800m``, ``32Gi`` (binary suffixes when asked
    and exact), nano-units as a last resort."""
    if value == value.to_integral_value():
        whole = int(value)
        if binary and whole:
            for suffix, power in _BINARY_SUFFIXES:
                if whole % (1024**power) == 0:
                    return f"{whole // 1024**power}{suffix}"
        return str(whole)
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return f"{int((value * 1_000_000_000).to_integral_value())}n"
