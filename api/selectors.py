"""Label selectors, validated, evaluated and written as Kubernetes does it.

``matchLabels`` and ``matchExpressions`` follow ``metav1.LabelSelector``
(``ValidateLabelSelector``, ``LabelSelectorAsSelector``); ``Gt`` and ``Lt`` compare a label
as a 64-bit integer, as node affinity and ``labels.Requirement`` do. :func:`to_query` writes
the ``labelSelector`` parameter the way ``Selector.String()`` does, from validated keys and
values only, so the API server reads exactly the selector the project evaluates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError

from api.model import KubeModel, Rule

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]

LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)
_LABEL_KEY = re.compile(LABEL_KEY_PATTERN)
_INT64 = re.compile(r"[+-]?[0-9]+")  # strconv.ParseInt(s, 10, 64), range checked apart

KEY_RULE = (
    "an optional DNS-subdomain prefix of at most 253 characters and '/', then a name of at "
    "most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric"
)
VALUE_RULE = (
    "at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric (or empty)"
)


def _shown(text: str) -> str:
    """``text`` quoted for an error message, cut short: keys and values come from users."""
    return repr(text) if len(text) <= 80 else f"{text[:80]!r}… ({len(text)} characters)"


def label_key_error(key: str) -> str | None:
    """Why ``key`` is not a valid label key (a Kubernetes qualified name), or None."""
    prefix, slash, _ = key.rpartition("/")
    if not _LABEL_KEY.match(key) or (slash and len(prefix) > 253):
        return f"label key {_shown(key)} must be {KEY_RULE}"
    return None


def label_value_error(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or None."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return f"label value {_shown(value)} must be {VALUE_RULE}"
    return None


def label_error(key: str, value: str) -> str | None:
    """Why ``key=value`` is not a valid Kubernetes label, or None when it is."""
    return label_key_error(key) or label_value_error(value)


def _valid_key(key: str) -> str:
    if problem := label_key_error(key):
        raise ValueError(problem)
    return key


def _valid_value(value: str) -> str:
    if problem := label_value_error(value):
        raise ValueError(problem)
    return value


def _valid_keys(labels: dict[str, str]) -> dict[str, str]:
    for key in labels:
        _valid_key(key)
    return labels


LabelKey = Annotated[
    str,
    AfterValidator(_valid_key),
    # in the CRD only: in Python the validator says what is wrong in words
    Field(json_schema_extra={"minLength": 1, "maxLength": 317, "pattern": LABEL_KEY_PATTERN}),
]
"""A label key; the API server checks its shape, the controller also the prefix length."""
LabelValue = Annotated[
    str,
    AfterValidator(_valid_value),
    Field(json_schema_extra={"maxLength": 63, "pattern": LABEL_VALUE_PATTERN}),
]
"""A label value (the pattern in the CRD; in Python the validator says it in words)."""


def _parse_int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: the number, or None when Go refuses it."""
    if not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


class LabelSelectorRequirement(KubeModel):
    """One requirement: ``key`` compared with ``values`` by ``operator``."""

    key: LabelKey
    """The label key the requirement applies to."""
    operator: Operator
    """In, NotIn, Exists, DoesNotExist, or Gt and Lt (the label as an integer)."""
    values: list[LabelValue] = Field(default_factory=list, max_length=64)
    """Values for In and NotIn (at least one), one integer for Gt and Lt; empty for Exists
    and DoesNotExist."""

    rules = (
        Rule(
            cel="self.operator in ['In', 'NotIn'] ? "
            "(has(self.values) && size(self.values) > 0) : "
            "self.operator in ['Gt', 'Lt'] ? "
            "(has(self.values) && size(self.values) == 1 && "
            "self.values[0].matches('^[+-]?[0-9]{1,19}$')) : "
            "(!has(self.values) || size(self.values) == 0)",
            message="values must be non-empty for operators In and NotIn, one 64-bit integer "
            "for Gt and Lt, and empty for Exists and DoesNotExist",
            check=lambda r: (
                bool(r.values)
                if r.operator in ("In", "NotIn")
                else len(r.values) == 1 and _parse_int64(r.values[0]) is not None
                if r.operator in ("Gt", "Lt")
                else not r.values
            ),
        ),
    )

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement (``labels.Requirement.Matches``)."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        have, bound = _parse_int64(labels.get(self.key, "")), _parse_int64(self.values[0])
        if have is None or bound is None:
            return False
        return have > bound if self.operator == "Gt" else have < bound

    def to_query(self) -> str:
        """This requirement as ``labels.Requirement.String()`` writes it."""
        values = ",".join(sorted(self.values))
        return {
            "In": f"{self.key} in ({values})",
            "NotIn": f"{self.key} notin ({values})",
            "Exists": self.key,
            "DoesNotExist": f"!{self.key}",
            "Gt": f"{self.key}>{values}",
            "Lt": f"{self.key}<{values}",
        }[self.operator]


class LabelSelector(KubeModel):
    """A label query: every ``matchLabels`` pair and every ``matchExpressions`` entry must hold.

    An empty selector matches every object.
    """

    match_labels: Annotated[dict[str, LabelValue], AfterValidator(_valid_keys)] = Field(
        default_factory=dict,
        max_length=64,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"self.all(k, k.size() <= 317 && k.matches(r'{LABEL_KEY_PATTERN}'))",
                    "message": f"keys must be {KEY_RULE}",
                }
            ]
        },
    )
    """Labels that must be present with exactly these values."""
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list, max_length=32)
    """Requirements that must all hold."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with ``labels`` is selected."""
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )


def to_query(selector: LabelSelector) -> str:
    """The selector as the ``labelSelector`` parameter of a list call, written as
    ``LabelSelectorAsSelector(selector).String()`` writes it: requirements ordered by key,
    the values of each sorted. Keys and values are validated, so no ``,`` or ``(`` in a
    value can change what the API server reads."""
    requirements = [(k, f"{k}={v}") for k, v in selector.match_labels.items()]
    requirements += [(r.key, r.to_query()) for r in selector.match_expressions]
    return ",".join(text for _, text in sorted(requirements, key=lambda kv: kv[0]))


def stored_selector(raw: Any) -> LabelSelector | None:
    """A selector read from a stored object, or None (selects nothing) when it is absent
    or not a valid one (an object written before validation was this strict), as
    Kubernetes' controllers treat a selector ``LabelSelectorAsSelector`` refuses."""
    if raw is None:
        return None
    try:
        return LabelSelector.model_validate(raw)
    except ValidationError:
        return None


def selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A missing selector selects nothing; an empty one selects everything (as Kubernetes)."""
    return selector is not None and selector.matches(labels)
