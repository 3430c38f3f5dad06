"""Label selectors, evaluated exactly as Kubernetes evaluates ``metav1.LabelSelector``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from api.model import KubeModel, Rule

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


class LabelSelectorRequirement(KubeModel):
    """One requirement: ``key`` compared with ``values`` by ``operator``."""

    key: str = Field(min_length=1, max_length=317)
    """The label key the requirement applies to."""
    operator: Operator
    """In, NotIn, Exists or DoesNotExist."""
    values: list[str] = Field(default_factory=list, max_length=64)
    """Values for In and NotIn (at least one); must be empty for Exists and DoesNotExist."""

    rules = (
        Rule(
            cel="self.operator in ['In', 'NotIn'] ? "
            "(has(self.values) && size(self.values) > 0) : "
            "(!has(self.values) || size(self.values) == 0)",
            message="values must be non-empty for operators In and NotIn "
            "and empty for Exists and DoesNotExist",
            check=lambda r: bool(r.values) == (r.operator in ("In", "NotIn")),
        ),
    )

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present


class LabelSelector(KubeModel):
    """A label query: every ``matchLabels`` pair and every ``matchExpressions`` entry must hold.

    An empty selector matches every object.
    """

    match_labels: dict[str, str] = Field(default_factory=dict)
    """Labels that must be present with exactly these values."""
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list, max_length=32)
    """Requirements that must all hold."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with ``labels`` is selected."""
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )


def to_query(selector: LabelSelector) -> str:
    """The selector as the ``labelSelector`` query parameter of a list call."""
    parts = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    for r in selector.match_expressions:
        values = ",".join(sorted(r.values))
        parts.append(
            {
                "In": f"{r.key} in ({values})",
                "NotIn": f"{r.key} notin ({values})",
                "Exists": r.key,
                "DoesNotExist": f"!{r.key}",
            }[r.operator]
        )
    return ",".join(parts)


def selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A missing selector selects nothing; an empty one selects everything (as Kubernetes)."""
    return selector is not None and selector.matches(labels)


_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_QUALIFIED = re.compile(
    r"^(([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def label_error(key: str, value: str) -> str | None:
    """Why ``key=value`` is not a valid Kubernetes label, or None when it is."""
    prefix, _, name = key.rpartition("/")
    if not _QUALIFIED.match(key) or len(name) > 63 or len(prefix) > 253:
        return (
            f"label key {key!r} must be an optional DNS-subdomain prefix and '/', then a name "
            "of at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric"
        )
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return (
            f"label value {value!r} must be at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending alphanumeric (or empty)"
        )
    return None
