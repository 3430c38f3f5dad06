"""The rules in force: built-in, replaced part by part from the hub, refused when they do
not compile, and a kind whose rules are too slow set aside."""

from __future__ import annotations

import time
from typing import Any

import pytest

from propagator.interpreter.registry import Interpreters

WIDGET = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}


def _rules(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "ResourceInterpreter",
        "metadata": {"name": name, "generation": 1},
        "spec": spec,
    }


WIDGET_RULES = _rules(
    "widget.example.com",
    {
        "target": {"group": "example.com", "kind": "Widget"},
        "health": {
            "checks": [
                {
                    "when": "self.?status.?phase.orValue('') == 'Ready'",
                    "health": "Healthy",
                },
                {
                    "when": "self.?status.?phase.orValue('') == 'Failed'",
                    "health": "Degraded",
                    "message": "'failed: ' + self.status.?reason.orValue('?')",
                },
            ]
        },
        "replicas": {
            "count": "self.spec.size",
            "field": "/spec/size",
            "podTemplate": "/spec/pod",
        },
        "status": [
            {"name": "ready", "value": "self.?status.?ready.orValue(0)", "aggregate": "Sum"},
            {"name": "phase", "value": "self.?status.?phase.orValue('')"},
        ],
    },
)


def test_a_kind_without_rules_is_healthy_once_it_exists_and_says_so() -> None:
    rules = Interpreters()
    verdict = rules.verdict(WIDGET)
    assert verdict.health == "Healthy"
    assert verdict.message == "no health rule for Widget.example.com: healthy once applied"
    assert not rules.interprets("example.com/v1", "Widget")


def test_a_platforms_rules_judge_a_custom_kind() -> None:
    rules = Interpreters()
    compiled = rules.set(WIDGET_RULES)
    assert compiled.error is None
    assert rules.interprets("example.com/v1", "Widget")
    assert rules.verdict(WIDGET).health == "Progressing"  # no check holds: otherwise
    failed = {**WIDGET, "status": {"phase": "Failed", "reason": "OOM"}}
    assert (rules.verdict(failed).health, rules.verdict(failed).message) == (
        "Degraded",
        "failed: OOM",
    )
    ready = {
        **WIDGET,
        "spec": {"size": 4, "pod": {"spec": {}}},
        "status": {"phase": "Ready", "ready": 4},
    }
    assert rules.verdict(ready).health == "Healthy"
    assert rules.reflect(ready) == ({"ready": 4, "phase": "Ready"}, {"ready": "Sum"})
    replicas = rules.replicas(ready)
    assert replicas is not None
    assert (replicas.count, replicas.field) == (4, "/spec/size")
    assert rules.replica_field("example.com/v1", "Widget") == "/spec/size"
    rules.remove("widget.example.com")
    assert rules.verdict(failed).health == "Healthy"


def test_a_rule_that_does_not_compile_is_refused_with_where_and_why() -> None:
    rules = Interpreters()
    broken = _rules(
        "widget.example.com",
        {
            "target": {"group": "example.com", "kind": "Widget"},
            "health": {"checks": [{"when": "self.status.phase ==", "health": "Healthy"}]},
            "replicas": {"count": "'three'"},
        },
    )
    compiled = rules.set(broken)
    assert compiled.error is not None
    assert "spec.health.checks[0].when" in compiled.error
    assert "line 1 column 21" in compiled.error
    assert "spec.replicas.count" in compiled.error
    assert "is of type STRING, not int" in compiled.error
    assert not rules.interprets("example.com/v1", "Widget")  # not used


def test_a_broken_change_falls_back_to_the_built_in_rules() -> None:
    rules = Interpreters()
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1},
        "status": {"updatedReplicas": 1, "availableReplicas": 1, "replicas": 1},
    }
    always = _rules(
        "deployment.apps",
        {
            "target": {"group": "apps", "kind": "Deployment"},
            "health": {"checks": [{"when": "true", "health": "Degraded", "message": "'no'"}]},
        },
    )
    assert rules.set(always).error is None
    assert rules.verdict(deployment).health == "Degraded"
    # only health was replaced: the built-in replicas rule still holds
    assert rules.replica_field("apps/v1", "Deployment") == "/spec/replicas"
    always["spec"]["health"]["checks"][0]["when"] = "nope("
    assert rules.set(always).error is not None
    assert rules.verdict(deployment).health == "Healthy"


def test_one_name_per_kind() -> None:
    wrong = _rules("anything", {"target": {"group": "example.com", "kind": "Widget"}})
    compiled = Interpreters().set(wrong)
    assert compiled.error is not None
    assert "metadata.name must be the target's kind in lower case" in compiled.error


def test_a_rule_over_budget_reads_unknown_and_nothing_else_is_judged_by_it() -> None:
    clock = [0.0]
    rules = Interpreters(time_limit_s=1e-9, pause_s=60, clock=lambda: clock[0])
    rules.set(WIDGET_RULES)
    ready = {**WIDGET, "status": {"phase": "Ready"}}
    verdict = rules.verdict(ready)
    assert verdict.health == "Unknown"
    assert "over the limit" in verdict.message
    assert "Widget.example.com is not judged for 60 s" in verdict.message
    assert rules.reflect(ready) == ({}, {})  # paused: not evaluated
    clock[0] = 61
    rules.time_limit_s = 10.0
    assert rules.verdict(ready).health == "Healthy"


def test_a_rule_is_not_slow_because_the_machine_was_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the processor time the rules take counts: a wall clock that jumps a second
    during each evaluation (the process waiting for a core) pauses nothing."""
    wall = [0.0]

    def jumping() -> float:
        wall[0] += 1.0
        return wall[0]

    monkeypatch.setattr(time, "perf_counter", jumping)
    monkeypatch.setattr(time, "monotonic", jumping)
    rules = Interpreters(time_limit_s=0.05, pause_s=60)
    rules.set(WIDGET_RULES)
    ready = {**WIDGET, "metadata": {"name": "w", "resourceVersion": "1"}}
    ready["status"] = {"phase": "Ready"}
    assert rules.verdict(ready).health == "Healthy"
    assert rules.verdict({**ready, "metadata": {"name": "w", "resourceVersion": "2"}}).health == (
        "Healthy"
    )


def test_a_hostile_object_reads_unknown_with_the_rule_that_failed() -> None:
    rules = Interpreters()
    rules.set(
        _rules(
            "widget.example.com",
            {
                "target": {"group": "example.com", "kind": "Widget"},
                "health": {
                    "checks": [
                        {"when": "self.status.items.all(x, x.ok)", "health": "Healthy"},
                    ]
                },
            },
        )
    )
    huge = {**WIDGET, "status": {"items": [{"ok": True}] * 20_000}}
    verdict = rules.verdict(huge)
    assert verdict.health == "Unknown"
    assert "ResourceInterpreter widget.example.com: health check 1" in verdict.message
    assert "/status/items holds 20,000 items, more than the 256 a rule reads" in verdict.message
    nested = {**WIDGET, "status": {"items": [{"ok": True, "parts": list(range(200))}] * 200}}
    assert "over the budget of 10,000 iterations" not in verdict.message
    rules.set(
        _rules(
            "widget.example.com",
            {
                "target": {"group": "example.com", "kind": "Widget"},
                "health": {
                    "checks": [
                        {
                            "when": "self.status.items.all(x, x.parts.all(p, p >= 0))",
                            "health": "Healthy",
                        },
                    ]
                },
            },
        )
    )
    walked = rules.verdict(nested)
    assert walked.health == "Unknown"
    assert "over the budget of 10,000 iterations" in walked.message
    assert rules.verdict({**WIDGET, "status": {"items": "not a list"}}).health == "Unknown"


def test_an_object_unchanged_since_it_was_judged_is_not_evaluated_again() -> None:
    clock = [0.0]
    rules = Interpreters(clock=lambda: clock[0])
    rules.set(WIDGET_RULES)
    live = {
        **WIDGET,
        "metadata": {"name": "w", "resourceVersion": "7"},
        "status": {"phase": "Ready"},
    }
    assert rules.verdict(live).health == "Healthy"
    # the same version again: the verdict is the one remembered (a resync costs nothing)
    rules.time_limit_s = 1e-9
    assert rules.verdict(live).health == "Healthy"
    # a new version is evaluated (and, over the limit now, paused)
    changed = {**live, "metadata": {"name": "w", "resourceVersion": "8"}}
    assert rules.verdict(changed).health == "Unknown"
    # new rules: nothing remembered holds
    rules.time_limit_s = 10.0
    clock[0] = 100
    rules.set({**WIDGET_RULES, "spec": {**WIDGET_RULES["spec"], "status": []}})
    assert rules.verdict(live).health == "Healthy"
    assert rules.reflect(live) == ({}, {})


def test_failures_are_told_by_kind_and_reason() -> None:
    told: list[tuple[str, str]] = []
    rules = Interpreters(failed=lambda kind, reason: told.append((kind, reason)))
    rules.set(WIDGET_RULES)
    broken = {**WIDGET, "status": {"phase": 7}}  # a number where the rule compares a string
    rules.set(
        _rules(
            "widget.example.com",
            {
                "target": {"group": "example.com", "kind": "Widget"},
                "health": {
                    "checks": [{"when": "self.status.phase.startsWith('R')", "health": "Healthy"}]
                },
            },
        )
    )
    assert rules.verdict(broken).health == "Unknown"
    rules.time_limit_s = 1e-9
    assert rules.verdict({**WIDGET, "status": {"phase": "Ready"}}).health == "Unknown"
    assert told == [("example.com/Widget", "error"), ("example.com/Widget", "slow")]
