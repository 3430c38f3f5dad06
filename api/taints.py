"""Taints on member clusters and the tolerations that let an application land on them,
matched exactly as Kubernetes matches ``v1.Taint`` and ``v1.Toleration``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import Field

from api.model import KubeModel, Rule

TaintEffect = Literal["NoSchedule", "NoExecute"]

NOT_READY_TAINT = "propagator.io/not-ready"
UNREACHABLE_TAINT = "propagator.io/unreachable"

QUALIFIED_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


class Taint(KubeModel):
    """Keeps applications off a member cluster unless they tolerate it."""

    key: str = Field(min_length=1, max_length=317, pattern=QUALIFIED_NAME)
    """Taint key, a qualified name such as ``example.com/dedicated``."""
    value: str = Field(default="", max_length=63)
    """Optional taint value."""
    effect: TaintEffect
    """NoSchedule: no new placements. NoExecute: also removes what is placed there."""


class Toleration(KubeModel):
    """Lets an application be placed on clusters carrying a matching taint."""

    key: str = Field(default="", max_length=317)
    """Taint key to match; empty with operator Exists matches every taint."""
    operator: Literal["Exists", "Equal"] = "Equal"
    """Equal compares the value; Exists matches any value."""
    value: str = Field(default="", max_length=63)
    """Value to compare with operator Equal; must be empty with Exists."""
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
    )

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration matches ``taint`` (Kubernetes ``ToleratesTaint``)."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def untolerated(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> list[Taint]:
    """The taints that no toleration matches."""
    tolerations = list(tolerations)
    return [t for t in taints if not any(tol.tolerates(t) for tol in tolerations)]
