"""Label selectors as apimachinery v0.37.2 validates, matches and writes them (expected
values are Kubernetes' answers; tests/e2e/semantics/test_k8s_semantics.py compares many more)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from api.selectors import LabelSelector, label_error, selects, to_query


def selector(**spec: Any) -> LabelSelector:
    return LabelSelector.model_validate(spec)


@pytest.mark.parametrize(
    ("spec", "where", "why"),
    [
        ({"matchLabels": {"k" * 254: "v"}}, "matchLabels", "label key 'kkkk"),
        ({"matchLabels": {"-key": "v"}}, "matchLabels", "label key '-key'"),
        ({"matchLabels": {"a/b/c": "v"}}, "matchLabels", "label key 'a/b/c'"),
        ({"matchLabels": {"p" * 254 + "/n": "v"}}, "matchLabels", "at most 253 characters"),
        ({"matchLabels": {"a": "b,c"}}, "matchLabels.a", "label value 'b,c'"),
        ({"matchLabels": {"a": "a b"}}, "matchLabels.a", "label value 'a b'"),
        ({"matchLabels": {"a": "-value"}}, "matchLabels.a", "label value '-value'"),
        ({"matchLabels": {"a": "v" * 64}}, "matchLabels.a", "at most 63"),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x y"]}]},
            "matchExpressions.0.values.0",
            "label value 'x y'",
        ),
        (
            {"matchExpressions": [{"key": "-key", "operator": "Exists"}]},
            "matchExpressions.0.key",
            "label key '-key'",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In"}]},
            "matchExpressions.0",
            "values must be non-empty for operators In and NotIn",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "matchExpressions.0",
            "empty for Exists and DoesNotExist",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1", "2"]}]},
            "matchExpressions.0",
            "one 64-bit integer for Gt and Lt",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Lt", "values": ["ten"]}]},
            "matchExpressions.0",
            "one 64-bit integer for Gt and Lt",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["9" * 19]}]},
            "matchExpressions.0",
            "one 64-bit integer for Gt and Lt",
        ),
    ],
)
def test_refuses_what_the_api_server_refuses(spec: dict[str, Any], where: str, why: str) -> None:
    with pytest.raises(ValidationError) as caught:
        selector(**spec)
    error = caught.value.errors()[0]
    assert ".".join(str(p) for p in error["loc"]) == where
    assert why in error["msg"]


def test_long_values_are_cut_short_in_errors() -> None:
    with pytest.raises(ValidationError) as caught:
        selector(matchLabels={"a": "x " * 5000})
    assert "(10000 characters)" in str(caught.value)
    assert len(caught.value.errors()[0]["msg"]) < 400


@pytest.mark.parametrize(
    ("spec", "query"),
    [
        ({}, ""),
        ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["b", "a"]},
                    {"key": "env", "operator": "NotIn", "values": ["dev"]},
                    {"key": "team", "operator": "Exists"},
                    {"key": "legacy", "operator": "DoesNotExist"},
                    {"key": "app", "operator": "In", "values": ["x", "x"]},
                ],
            },
            "app=web,app in (x,x),env notin (dev),!legacy,team,tier in (a,b)",
        ),
        (
            {
                "matchExpressions": [
                    {"key": "gpus", "operator": "Gt", "values": ["4"]},
                    {"key": "cost", "operator": "Lt", "values": ["10"]},
                ]
            },
            "cost<10,gpus>4",
        ),
    ],
)
def test_query_strings_as_kubernetes_writes_them(spec: dict[str, Any], query: str) -> None:
    assert to_query(selector(**spec)) == query


@pytest.mark.parametrize(
    ("operator", "values", "labels", "matches"),
    [
        ("In", ["a", "b"], {"k": "a"}, True),
        ("In", ["a"], {}, False),
        ("NotIn", ["a"], {}, True),
        ("NotIn", ["a"], {"k": "a"}, False),
        ("Exists", [], {"k": ""}, True),
        ("DoesNotExist", [], {"k": ""}, False),
        ("Gt", ["4"], {"k": "5"}, True),
        ("Gt", ["4"], {"k": "4"}, False),
        ("Gt", ["4"], {"k": "05"}, True),  # strconv.ParseInt reads leading zeros
        ("Gt", ["4"], {"k": "five"}, False),
        ("Gt", ["4"], {}, False),
        ("Lt", ["4"], {"k": "-3"}, True),
        ("Lt", ["4"], {"k": "99999999999999999999"}, False),  # beyond int64: no match
    ],
)
def test_requirements_match_as_labels_requirement_does(
    operator: str, values: list[str], labels: dict[str, str], matches: bool
) -> None:
    s = selector(matchExpressions=[{"key": "k", "operator": operator, "values": values}])
    assert s.matches(labels) is matches


def test_missing_selects_nothing_and_empty_selects_everything() -> None:
    assert not selects(None, {"a": "b"})
    assert selects(selector(), {"a": "b"})


def test_label_error_names_key_or_value() -> None:
    assert label_error("example.com/team", "web") is None
    assert "label key" in (label_error("Example.com/team", "web") or "")
    assert "label value" in (label_error("team", "web!") or "")


def test_a_stored_selector_that_no_longer_validates_selects_nothing() -> None:
    from api.selectors import stored_selector

    assert stored_selector({"matchLabels": {"a": "b,c"}}) is None
    assert not selects(stored_selector({"matchLabels": {"a": "b,c"}}), {"a": "b,c"})
    assert selects(stored_selector({"matchLabels": {"a": "b"}}), {"a": "b"})
