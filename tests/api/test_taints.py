"""Taints and tolerations as Kubernetes v1.37 validates and matches them
(``Toleration.ToleratesTaint`` with the comparison operators)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from api.taints import Taint, Toleration, untolerated


def taint(key: str = "k", value: str = "", effect: str = "NoSchedule") -> Taint:
    return Taint.model_validate({"key": key, "value": value, "effect": effect})


def toleration(**spec: Any) -> Toleration:
    return Toleration.model_validate(spec)


@pytest.mark.parametrize(
    ("spec", "t", "tolerates"),
    [
        ({"operator": "Exists"}, taint(), True),
        ({"key": "k", "operator": "Exists"}, taint(value="x"), True),
        ({"key": "k", "value": "x"}, taint(value="x"), True),
        ({"key": "k", "value": "x"}, taint(value="y"), False),
        ({"key": "k", "value": "", "operator": "Equal"}, taint(), True),
        ({"key": "other", "operator": "Exists"}, taint(), False),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, taint(), False),
        (
            {"operator": "Exists", "effect": "PreferNoSchedule"},
            taint(effect="PreferNoSchedule"),
            True,
        ),
        ({"key": "k", "operator": "Lt", "value": "100"}, taint(value="20"), True),
        ({"key": "k", "operator": "Lt", "value": "100"}, taint(value="100"), False),
        ({"key": "k", "operator": "Gt", "value": "100"}, taint(value="250"), True),
        ({"key": "k", "operator": "Gt", "value": "-5"}, taint(value="0"), True),
        # the taint's value is read as content.IsDecimalInteger reads it: no leading zero
        ({"key": "k", "operator": "Gt", "value": "1"}, taint(value="05"), False),
        ({"key": "k", "operator": "Gt", "value": "1"}, taint(value="high"), False),
        ({"key": "k", "operator": "Gt", "value": "1"}, taint(value="99999999999999999999"), False),
    ],
)
def test_tolerates_as_kubernetes(spec: dict[str, Any], t: Taint, tolerates: bool) -> None:
    assert toleration(**spec).tolerates(t) is bool(tolerates)


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"key": "k", "operator": "Exists", "value": "x"}, "value must be empty"),
        ({"operator": "Equal", "value": "x"}, "key is required unless operator is Exists"),
        ({"key": "k", "operator": "Gt", "value": "05"}, "must be a 64-bit integer"),
        ({"key": "k", "operator": "Lt", "value": "+5"}, "must be a 64-bit integer"),
        ({"key": "k", "operator": "Lt", "value": "9" * 20}, "must be a 64-bit integer"),
        ({"key": "bad key", "operator": "Exists"}, "key must be an optional DNS-subdomain"),
        ({"key": "k", "value": "a b"}, "value must be at most 63 letters"),
        ({"key": "k", "effect": "Sometimes"}, "effect"),
    ],
)
def test_tolerations_refused_with_the_rule(spec: dict[str, Any], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        toleration(**spec)


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"key": "-k", "effect": "NoSchedule"}, "label key '-k'"),
        ({"key": "k", "value": "a,b", "effect": "NoSchedule"}, "label value 'a,b'"),
        ({"key": "k", "effect": "NoAdmit"}, "effect"),
    ],
)
def test_taints_refused_with_the_rule(spec: dict[str, Any], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        Taint.model_validate(spec)


def test_untolerated_keeps_only_unmatched_taints() -> None:
    taints = [taint("a"), taint("b", effect="PreferNoSchedule")]
    assert untolerated(taints, [toleration(key="a", operator="Exists")]) == [taints[1]]
