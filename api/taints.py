"""Taints on member clusters and the tolerations that let an application land on them,
validated and matched exactly as Kubernetes does ``v1.Taint`` and ``v1.Toleration``
(``ToleratesTaint`` with the comparison operators of v1.37)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from pydantic import Field

from api.model import KubeModel, Rule
from api.selectors import (
    KEY_RULE,
    LABEL_KEY_PATTERN,
    LABEL_VALUE_PATTERN,
    VALUE_RULE,
    LabelKey,
    LabelValue,
    label_key_error,
    label_value_error,
)

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
FILTERING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Effects that keep an application off a cluster; PreferNoSchedule only lowers its score."""

NOT_READY_TAINT = "propagator.io/not-ready"
UNREACHABLE_TAINT = "propagator.io/unreachable"

DECIMAL_INTEGER = r"^(0|-?[1-9][0-9]*)$"
_DECIMAL_INTEGER = re.compile(DECIMAL_INTEGER)


def _decimal_integer(text: str) -> int | None:
    """The value as Gt and Lt compare it: a decimal integer without leading zeros or plus
    sign (``content.IsDecimalInteger``) that fits 64 bits, else None."""
    if not _DECIMAL_INTEGER.match(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


class Taint(KubeModel):
    """Keeps applications off a member cluster unless they tolerate it."""

    key: LabelKey
    """Taint key, a qualified name such as ``example.com/dedicated``."""
    value: LabelValue = ""
    """Optional taint value (a label value)."""
    effect: TaintEffect
    """NoSchedule: no new placements. PreferNoSchedule: placed there only when better
    clusters lack room. NoExecute: also removes what is placed there."""


class Toleration(KubeModel):
    """Lets an application be placed on clusters carrying a matching taint."""

    key: str = Field(default="", max_length=317)
    """Taint key to match; empty with operator Exists matches every taint."""
    operator: Literal["Exists", "Equal", "Gt", "Lt"] = "Equal"
    """Equal compares the value; Exists matches any value; Gt and Lt match a taint whose
    value, an integer, is greater or less than this one's."""
    value: str = Field(default="", max_length=63)
    """Value to compare: empty with Exists, an integer with Gt and Lt."""
    effect: TaintEffect | None = None
    """Effect to match; unset matches every effect."""

    rules = (
        Rule(
            cel="self.operator != 'Exists' || !has(self.value) || self.value == ''",
            message="value must be empty when operator is Exists",
            check=lambda t: t.operator != "Exists" or t.value == "",
        ),
        Rule(
            cel="self.operator == 'Exists' || (has(self.key) && self.key != '')",
            message="key is required unless operator is Exists",
            check=lambda t: t.operator == "Exists" or t.key != "",
        ),
        Rule(
            cel="!(self.operator in ['Gt', 'Lt']) || "
            f"(has(self.value) && self.value.matches('{DECIMAL_INTEGER}'))",
            message="value must be a 64-bit integer (no leading zeros or plus sign) "
            "when operator is Gt or Lt",
            check=lambda t: t.operator not in ("Gt", "Lt") or _decimal_integer(t.value) is not None,
        ),
        Rule(
            cel=f"!has(self.key) || self.key == '' || self.key.matches(r'{LABEL_KEY_PATTERN}')",
            message=f"key must be {KEY_RULE}",
            check=lambda t: t.key == "" or label_key_error(t.key) is None,
        ),
        Rule(
            cel="self.operator != 'Equal' || !has(self.value) || "
            f"self.value.matches(r'{LABEL_VALUE_PATTERN}')",
            message=f"value must be {VALUE_RULE} when operator is Equal",
            check=lambda t: t.operator != "Equal" or label_value_error(t.value) is None,
        ),
    )

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration matches ``taint`` (Kubernetes ``ToleratesTaint``)."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator == "Equal":
            return self.value == taint.value
        mine, theirs = _decimal_integer(self.value), _decimal_integer(taint.value)
        if mine is None or theirs is None:
            return False
        return theirs < mine if self.operator == "Lt" else theirs > mine


def untolerated(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> list[Taint]:
    """The taints that no toleration matches."""
    tolerations = list(tolerations)
    return [t for t in taints if not any(tol.tolerates(t) for tol in tolerations)]
