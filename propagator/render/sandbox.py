"""The template sandbox: Jinja2's ``SandboxedEnvironment`` with strict undefined names and
bounded arithmetic, and whole-value expressions that keep their type.

The sandbox already refuses unsafe attributes and bounds ``range`` (jinja2's MAX_RANGE);
here ``*``, ``**`` and ``+`` are bounded too, so that ``'a' * 10**9`` or ``10 ** 10**9``
fails at once with a message instead of eating memory or a CPU. What still takes long
(nested loops) is stopped by the render worker's deadline (:mod:`propagator.render.worker`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from jinja2 import StrictUndefined, Undefined
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

MAX_TEXT = 1 << 20
"""Characters (or items) a string or list made by ``*`` or ``+`` may hold."""
MAX_POWER_BITS = 4096
"""Bits an integer made by ``**`` may hold."""


def _size(value: Any) -> int | None:
    return len(value) if isinstance(value, str | bytes | list | tuple) else None


class BoundedSandbox(SandboxedEnvironment):
    """A sandbox whose ``*``, ``**`` and ``+`` refuse results larger than the bounds."""

    intercepted_binops = frozenset({"*", "**", "+"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and isinstance(left, int) and isinstance(right, int):
            if right > 0 and abs(left) > 1 and right * math.log2(abs(left)) > MAX_POWER_BITS:
                raise SecurityError(
                    f"{left} ** {right} is too large (more than {MAX_POWER_BITS} bits)"
                )
        elif operator == "*":
            for seq, times in ((left, right), (right, left)):
                size = _size(seq)
                if size is not None and isinstance(times, int) and size * times > MAX_TEXT:
                    raise SecurityError(
                        f"repeating a {type(seq).__name__} of {size} {times} times makes more "
                        f"than {MAX_TEXT} items"
                    )
        elif operator == "+":
            a, b = _size(left), _size(right)
            if a is not None and b is not None and a + b > MAX_TEXT:
                raise SecurityError(f"joining makes more than {MAX_TEXT} items")
        return super().call_binop(context, operator, left, right)


ENVIRONMENT = BoundedSandbox(undefined=StrictUndefined, autoescape=False)


def whole_expression(source: str) -> str | None:
    """The expression of a string that is exactly ``{{ expression }}``, else None."""
    stripped = source.strip()
    if not (stripped.startswith("{{") and stripped.endswith("}}")):
        return None
    inner = stripped[2:-2]
    if "{{" in inner or "}}" in inner or "{%" in inner or "{#" in inner:
        return None
    return inner.strip("-").strip()


NOT_JSON = object()
"""What :func:`json_value` returns for a Python object that is no JSON value."""


def json_value(value: Any) -> Any:
    """``value`` if it is JSON as the template meant it (strings, integers, finite floats,
    booleans, null, lists and string-keyed maps of them), else :data:`NOT_JSON` (the
    caller renders text instead); raises ValueError for a number JSON cannot hold and
    UndefinedError for an undefined name."""
    if isinstance(value, Undefined):
        str(value)  # StrictUndefined raises, naming what is undefined
    if value is None or isinstance(value, str | bool | int):
        return str(value) if isinstance(value, str) else value  # Markup -> str
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a JSON number")
        return value
    if isinstance(value, list | tuple):
        items = [json_value(v) for v in value]
        return NOT_JSON if any(i is NOT_JSON for i in items) else items
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        out = {k: json_value(v) for k, v in value.items()}
        return NOT_JSON if any(v is NOT_JSON for v in out.values()) else out
    return NOT_JSON
