"""Canary metric analysis: judging, reading Prometheus answers, templated queries, and the
measurements of a step (against a fake Prometheus transport)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from api.rollout import Canary, MetricCheck
from propagator.canary.analysis import Analysis, judge, query_for, value_of
from propagator.canary.machine import CanaryState, Finding, Seen, advance

CHECK = MetricCheck.model_validate(
    {
        "name": "errors",
        "address": "http://prometheus:9090",
        "query": 'errors{cluster="{{ cluster.name }}", revision="{{ revision }}"}',
        "max": 0.05,
        "interval": "10s",
        "failureLimit": 1,
    }
)
STATE = CanaryState("Progressing", "old", "new", 0, 20, 0.0, 0.0)


def test_judge() -> None:
    assert judge(CHECK, 0.01).ok
    assert judge(CHECK, 0.2).message == "0.2 is above max 0.05"
    assert judge(CHECK, None).message == "no data"
    assert not judge(CHECK, float("nan")).ok
    low = MetricCheck.model_validate({**CHECK.model_dump(by_alias=True), "max": None, "min": 1})
    assert judge(low, 0.5).message == "0.5 is below min 1"


def vector(*values: float) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": {}, "value": [1, str(v)]} for v in values],
        },
    }


def test_value_of() -> None:
    assert value_of(vector(0.5)) == 0.5
    assert value_of(vector()) is None
    assert (
        value_of({"status": "success", "data": {"resultType": "scalar", "result": [1, "3"]}}) == 3
    )
    with pytest.raises(ValueError, match="returned 2 series; it must return one"):
        value_of(vector(1, 2))
    with pytest.raises(ValueError, match="Prometheus: parse error"):
        value_of({"status": "error", "error": "parse error"})


def test_queries_render_per_cluster_in_a_sandbox() -> None:
    assert query_for(CHECK, "member-1", {}, STATE, "shop") == (
        'errors{cluster="member-1", revision="new"}'
    )
    bad = MetricCheck.model_validate({**CHECK.model_dump(by_alias=True), "query": "{{ nope }}"})
    with pytest.raises(ValueError, match="query of check errors: 'nope' is undefined"):
        query_for(bad, "member-1", {}, STATE, "shop")
    escape = MetricCheck.model_validate(
        {**CHECK.model_dump(by_alias=True), "query": "{{ cluster.__class__.__mro__ }}"}
    )
    with pytest.raises(ValueError, match="query of check errors"):
        query_for(escape, "member-1", {}, STATE, "shop")


class FakePrometheus:
    """Answers each cluster's query with the ratio the test sets; counts the queries."""

    def __init__(self) -> None:
        self.ratio = {"c1": 0.01, "c2": 0.01}
        self.queries: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        self.queries.append(query)
        cluster = query.split('cluster="')[1].split('"')[0]
        return httpx.Response(200, content=json.dumps(vector(self.ratio[cluster])))


def measure(analysis: Analysis, now: float, state: CanaryState = STATE) -> Finding:
    clusters: dict[str, dict[str, str]] = {"c1": {}, "c2": {}}
    return anyio.run(analysis.measure, "shop/web", "shop", state, [CHECK], clusters, now)


def test_a_step_holds_once_every_cluster_passed_and_fails_beyond_the_limit() -> None:
    prom = FakePrometheus()
    analysis = Analysis(["http://prometheus:9090"], transport=httpx.MockTransport(prom))
    assert measure(analysis, 0.0) == Finding(True)
    assert len(prom.queries) == 2
    assert measure(analysis, 5.0) == Finding(True)  # not due again yet
    assert len(prom.queries) == 2
    assert analysis.next_due("shop/web", [CHECK], 5.0) == 5.0
    prom.ratio["c2"] = 0.5
    assert measure(analysis, 10.0).failed is None  # one failure tolerated
    failed = measure(analysis, 20.0)
    assert failed.failed == (
        "check errors on c2: 0.5 is above max 0.05 (2 failed measurement(s), 1 tolerated)"
    )
    # a new step starts with a clean slate
    nxt = CanaryState("Progressing", "old", "new", 1, 50, 0.0, 30.0)
    prom.ratio["c2"] = 0.01
    assert measure(analysis, 30.0, nxt) == Finding(True)


def test_an_address_the_operator_did_not_allow_is_never_queried() -> None:
    prom = FakePrometheus()
    analysis = Analysis(["http://other:9090"], transport=httpx.MockTransport(prom))
    finding = measure(analysis, 0.0)
    assert prom.queries == []
    assert finding.failed is not None
    assert "is not among the Prometheus addresses the controller may query" in finding.failed


def test_the_step_machine_waits_for_the_analysis_and_rolls_back_on_it() -> None:
    canary = Canary.model_validate({"steps": [{"weight": 20}, {"weight": 100}]})
    seen = {"c1": Seen(True, "Healthy", "Healthy")}

    def step(finding: Finding) -> Any:
        return advance(STATE, canary, "new", lambda: True, ["c1"], seen, None, 1.0, finding)

    waiting, _ = step(Finding(False, None, "errors on c1"))
    assert (waiting.step, waiting.message) == (
        0,
        "step 1 of 2, weight 20: healthy; waiting for the analysis: errors on c1",
    )
    assert step(Finding(True))[0].step == 1
    rolled, rollback = step(Finding(False, "check errors on c1: 0.5 is above max 0.05"))
    assert rolled.phase == "RolledBack"
    assert rollback is not None
    assert rollback.reason == "Analysis"
